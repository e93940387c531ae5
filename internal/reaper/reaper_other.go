//go:build !linux

package reaper

import (
	"fmt"
	"os"
	"os/exec"
)

// Reapers need Linux's subreapers; elsewhere commands run as they are.
const supported = false

func setProcAttr(*exec.Cmd, bool) {}

// Main is the reaper: there is none here.
func Main([]string) int {
	fmt.Fprintln(os.Stderr, "reaper: not supported on this platform")
	return 127
}
