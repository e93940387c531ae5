//go:build tools

// Package tools pins the distribution registry (the CNCF OCI registry) that the
// end-to-end tests run on the node and `make release` pushes to.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
