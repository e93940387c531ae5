//go:build tools

// Package tools pins versitygw, the S3-compatible server that the end-to-end tests run
// inside the one-node cluster as the Stacks' state backend.
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
