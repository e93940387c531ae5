// Package repo locates the Stackwright checkout from inside a test, so harnesses can find
// ./bin and config/ whatever directory `go test` runs a package in.
package repo
