// Package project renders a Program (pulumi.com/v1) into the Pulumi YAML project it stands
// for: a deterministic Pulumi.yaml, so that equal programs share one artifact, the tarball
// (Tarball, the one render path, used by the Program controller and the Resolver) and the
// revision a Stack records for it. It does not evaluate expressions; the YAML language
// host does, at run time.
//
// It depends on little but the API types: `go test -fuzz` compiles every package its
// fuzz target's test binary holds again with coverage instrumentation, and the program
// package's tests hold the engine.
package project
