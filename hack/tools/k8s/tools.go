//go:build tools

// Package tools pins the Kubernetes control-plane binaries that envtest and the demo run.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
