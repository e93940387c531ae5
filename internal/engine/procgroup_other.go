//go:build !linux

package engine

import "os/exec"

// isolate is Linux-only: elsewhere the CLI runs in the caller's process group.
func isolate(*exec.Cmd) {}

// killGroup is Linux-only.
func killGroup(*exec.Cmd) {}

// processAlive cannot tell elsewhere, so no local lock is ever counted stale.
func processAlive(int) bool { return true }
