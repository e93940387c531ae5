//go:build tools

// Package tools pins the pulumi CLI that the engine package drives through the Automation API.
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
