// Command crdtrim keeps the Stack CRD small enough to install with a plain
// `kubectl apply` and to store comfortably in etcd. PKO's schema for
// spec.workspaceTemplate embeds a whole Pod spec, whose generated descriptions
// (copies of the upstream Pod documentation, which `kubectl explain pod.spec`
// shows anyway) make up most of the CRD. crdtrim removes those descriptions in
// the storage version, and every description of the other versions (`kubectl
// explain` shows the preferred one); the schemas themselves are untouched.
// `make manifests` runs it after controller-gen.
//
// Usage: go run ./hack/crdtrim FILE...
package main
