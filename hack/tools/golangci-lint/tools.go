//go:build tools

// Package tools pins golangci-lint (v2), run by make lint and make test.
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
