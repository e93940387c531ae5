//go:build tools

// Package tools pins the helm CLI that lints and renders charts/stackwright in tests and
// installs it in the end-to-end run.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
