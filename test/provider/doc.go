// Package provider implements stackwright-testing, a small Pulumi resource
// provider that exists only to exercise Stackwright end to end against the
// real Pulumi engine.
//
// The package owns eight custom resources, all served under the
// "stackwright-testing:index:" token prefix:
//
//   - File writes a file below a root directory. Its Read reports the file as
//     it is on disk, so deleting or editing the file by hand shows up as drift
//     on `pulumi refresh`.
//   - Random generates a secret alphanumeric string once, with crypto/rand.
//   - Flaky fails a configurable number of times before succeeding, counting
//     attempts in a file so the count survives provider restarts.
//   - Sleep blocks for a configurable duration, honouring cancellation.
//   - Hog allocates and touches a configurable amount of memory, holds it for a
//     few seconds and releases it: a provider that outgrows its runner's memory
//     limit, for induced out-of-memory faults only.
//   - ConfigMap manages a ConfigMap with the in-cluster credentials of the Pod
//     the provider runs in.
//   - TokenReview has the API server review a token file (a projected
//     ServiceAccount token) for an audience, with those same credentials.
//   - Environment records the names (not the values) of the environment
//     variables the provider process sees, which plugins inherit from the engine.
//
// Every path File and Flaky touch is relative to the directory named by the
// STACKWRIGHT_TESTING_ROOT environment variable (see [RootEnvVar]); absolute
// paths and paths that escape the root are rejected in Check.
//
// The package also owns the provider's identity ([Name], [Version]) and its
// assembly ([New]); cmd/pulumi-resource-stackwright-testing only runs it.
package provider
