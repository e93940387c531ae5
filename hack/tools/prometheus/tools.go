//go:build tools

// Package tools pins Prometheus, which the end-to-end tests run on the node behind a
// StackRollout's metric gate.
package tools

import _ "github.com/prometheus/prometheus/cmd/prometheus"
