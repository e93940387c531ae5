//go:build tools

// Package tools pins the Pulumi YAML language host: the only language runtime available offline.
package tools

import _ "github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml"
