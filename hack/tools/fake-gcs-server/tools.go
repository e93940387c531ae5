//go:build tools

// Package tools pins fake-gcs-server, the Google Cloud Storage emulator that the engine
// tests run on 127.0.0.1 as a gs:// state backend.
package tools

import _ "github.com/fsouza/fake-gcs-server"
