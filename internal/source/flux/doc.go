// Package flux resolves spec.fluxSource: it reads the status.artifact that Flux's
// source-controller publishes on a GitRepository, OCIRepository or Bucket in the Stack's
// namespace, downloads the tarball it points at and stores it in the artifact store only if
// its bytes match the digest source-controller declared.
//
// It owns the knowledge of Flux's source API (which kinds and versions Stacks may reference,
// how status.artifact and the Ready condition read in each version) and hands the Stack
// controller what it needs to watch those objects: the kinds installed in the cluster, a
// field-index key, and a predicate. It reads Flux objects as unstructured, so Stackwright
// builds without Flux's Go modules and works with whichever of v1 and v1beta2 the cluster
// serves.
package flux
