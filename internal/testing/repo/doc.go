// Package repo locates the Stackwright checkout from inside a test, so harnesses can find
// ./bin and config/ whatever directory `go test` runs a package in, and names the Go
// modules whose builds share compiled packages (AlignedModules), which hack/align-modules
// and a test keep at one version of every shared dependency. Its tests also hold the
// build scripts that keep cached test results honest (hack/testcache.sh) to their word,
// and waits for the servers harnesses start from ./bin to answer (WaitHTTP).
package repo
