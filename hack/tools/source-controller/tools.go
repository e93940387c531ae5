//go:build tools

// Package tools pins Flux's source-controller, which the end-to-end tests run in the
// one-node cluster so that Stacks with spec.fluxSource are proven against the real
// GitRepository and Bucket reconcilers, not objects the tests write themselves.
package tools

import _ "github.com/fluxcd/source-controller"
