package reaper

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

const supported = true

func setProcAttr(cmd *exec.Cmd, reaped bool) {
	// A reaper takes SIGTERM as "kill everything now"; a bare command is killed outright.
	death := syscall.SIGKILL
	if reaped {
		death = syscall.SIGTERM
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: death}
}

// Main is the reaper: it runs args and returns the status to exit with, unless the
// command was killed by a signal, which it then raises on itself.
func Main(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "reaper: no command to run")
		return 2
	}
	// Before anything starts, so that no signal is lost or takes the default action.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "reaper: failed to become a subreaper: %v\n", err)
		return 127
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Should the reaper itself be killed hard, the command goes too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "reaper: failed to start %s: %v\n", args[0], err)
		return 127
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	for waiting := true; waiting; {
		select {
		case s := <-sigs:
			if s == syscall.SIGINT {
				_ = cmd.Process.Signal(s)
				continue
			}
			killDescendants()
		case <-done:
			waiting = false
		}
	}
	// Only now: reaping any child earlier could take the command's status from Wait.
	reapAll()
	status, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if status.Signaled() {
		signal.Reset(status.Signal())
		_ = syscall.Kill(os.Getpid(), status.Signal())
		return 128 + int(status.Signal())
	}
	return status.ExitStatus()
}

// reapAll kills every descendant left and waits for them all: those whose parent died were
// reparented to the reaper, a subreaper, so nothing escapes.
func reapAll() {
	for {
		killDescendants()
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil: // ECHILD: nothing left
			return
		}
	}
}

// killDescendants sends SIGKILL to every process below this one.
func killDescendants() {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	queue := children[os.Getpid()]
	for len(queue) > 0 {
		pid := queue[0]
		queue = append(queue[1:], children[pid]...)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// parentOf reads a process's parent from /proc/<pid>/stat, whose second field (the command
// name, in parentheses) may itself hold spaces and parentheses.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}
