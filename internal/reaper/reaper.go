package reaper

import (
	"os"
	"os/exec"
)

// envMarker, set in a process's environment, makes Init run the reaper in it. The reaper
// takes it out of the command's environment, so that a command that is this binary again
// (a test) does not take itself for a reaper.
const envMarker = "STACKWRIGHT_REAPER"

// self is the path of this process's binary once Init has enabled reapers; empty until
// then, and Wrap leaves commands alone.
var self string

// Init is called first thing in main, and in TestMain of the packages whose tests run the
// engine. In a process started by Wrap it runs the reaper and exits with the command's
// status. Elsewhere it enables Wrap: a binary whose main does not call Init (a test binary
// of another package) runs commands without a reaper, as if on a platform without one.
func Init() {
	if os.Getenv(envMarker) != "" {
		os.Exit(run(os.Args[1:]))
	}
	if !supported {
		return
	}
	if path, err := os.Executable(); err == nil {
		self = path
	}
}

// Enabled reports whether Wrap puts commands under a reaper in this process.
func Enabled() bool { return self != "" }

// Wrap makes cmd, not yet started, run under a reaper, if Init enabled them. A reaper
// forwards SIGINT to the command (a graceful cancel); SIGTERM, or the death of the thread
// that started it, kills the command and every process below it at once. Wrap sets
// cmd.SysProcAttr: the reaper leads a process group of its own, with the command in it.
// Without a reaper, cmd leads the group and is killed (SIGKILL) when its starter dies.
func Wrap(cmd *exec.Cmd) {
	setProcAttr(cmd, self != "")
	if self == "" {
		return
	}
	cmd.Args = append([]string{self, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = self
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(env[:len(env):len(env)], envMarker+"=1")
}
