// Package devenv runs a throwaway local installation for development and the demo: a real
// kube-apiserver and etcd from ./bin (the same binaries the envtest suites use), the
// garbage collector and namespace controller of kube-controller-manager, with
// Stackwright's CRDs, a kubeconfig for kubectl, and the manager with the local executor,
// all in one process that tears everything down on exit.
package devenv
