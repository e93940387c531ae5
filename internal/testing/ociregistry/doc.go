// Package ociregistry runs the real distribution registry (bin/registry, built by `make
// tools` from github.com/distribution/distribution/v3) for tests: plain HTTP on 127.0.0.1
// (or an address the caller chose, e.g. one a cluster node can reach), storage in a
// directory of the caller's, stopped when the test ends.
package ociregistry
