//go:build tools

// Package tools pins the Kubernetes binaries: the control plane that envtest and the demo
// run, and the node components (kubelet, kube-proxy) plus the controller manager and
// scheduler that make cluster starts.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
