//go:build tools

// Package tools pins krew, which installs the plugin from `make krew`'s manifest in tests.
package tools

import _ "sigs.k8s.io/krew/cmd/krew"
