package engine

import (
	"errors"
	"os/exec"
	"syscall"
)

// killGroup kills what is left of the CLI's process group (reaper.Wrap made one) once the
// CLI has exited: without a reaper, a child the CLI started in its own group and did not
// stop would otherwise run on. (Plugins start groups of their own: the reaper kills them.)
func killGroup(cmd *exec.Cmd) {
	if cmd.Process == nil || cmd.Process.Pid <= 0 {
		return
	}
	// ESRCH (nothing left) is the usual answer.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// processAlive reports whether a process with pid exists in this PID namespace. A pid
// reused by another process reads as alive, which keeps a lock: the safe mistake.
func processAlive(pid int) bool {
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
