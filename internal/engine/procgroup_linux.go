package engine

import (
	"errors"
	"os/exec"
	"syscall"
)

// isolate puts the CLI in a process group of its own, which its language host and
// providers join, and has the kernel kill the CLI if the process that started it dies
// (a manager or runner killed hard), so that no engine run outlives its owner unseen.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills what is left of the CLI's process group once the CLI has exited: a
// plugin it did not stop (the CLI was killed, or it crashed) would otherwise run on.
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
