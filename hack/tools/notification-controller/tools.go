//go:build tools

// Package tools pins Flux's notification-controller, which the end-to-end tests run in the
// one-node cluster: its Receiver triggers pushes and its Alerts carry Stackwright's events.
package tools

import _ "github.com/fluxcd/notification-controller"
