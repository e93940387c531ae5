// Package kubetest runs a real kube-apiserver and etcd (controller-runtime's envtest, with
// the binaries `make tools` builds into ./bin) loaded with Stackwright's CRDs, once per
// test package.
package kubetest
