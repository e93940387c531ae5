// Package memcgtest gives a test a real memory cgroup v1 of its own, with a small limit,
// so that a process the test starts in it runs out of memory as a runner Pod's would:
// the kernel's OOM killer kills it, and the cgroup counts the kill. It needs root and the
// v1 memory controller (this machine's, and the one-node cluster's); elsewhere the test
// is skipped.
package memcgtest
