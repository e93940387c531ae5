// Package secretcache serves the manager's reads of Secrets without caching every Secret
// of the watched namespaces.
//
// A manager that cached Secrets would hold every Secret of every tenant in memory, most of
// them of no concern to any Stack (service account tokens, TLS keys, Helm releases), and
// its memory would grow with them. Instead the manager watches Secrets' metadata only (what
// tells a Stack that an input changed) and reads values from the API server. Client
// remembers the value of each Secret it read together with its resourceVersion, and
// answers from memory while the watched metadata still shows that resourceVersion: memory
// grows with the Secrets Stacks reference, API reads with how often they change.
package secretcache
