package reaper

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Name is the reaper binary's file name.
const Name = "stackwright-reaper"

var (
	mu   sync.RWMutex
	path string // the reaper Wrap uses; empty for none
)

// Locate finds the reaper next to this process's binary (as in ./bin and the images), or
// else on PATH, and has Wrap use it. Without one it returns why, and commands run bare.
func Locate() (string, error) {
	if !supported {
		return "", errors.New("reapers need Linux")
	}
	if self, err := os.Executable(); err == nil {
		next := filepath.Join(filepath.Dir(self), Name)
		if fi, err := os.Stat(next); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			Use(next)
			return next, nil
		}
	}
	p, err := exec.LookPath(Name)
	if err != nil {
		return "", fmt.Errorf("no %s next to this binary or on PATH", Name)
	}
	Use(p)
	return p, nil
}

// Use has Wrap start commands under the reaper at p; "" for none.
func Use(p string) {
	mu.Lock()
	defer mu.Unlock()
	path = p
}

// Path is the reaper Wrap uses, if any.
func Path() string {
	mu.RLock()
	defer mu.RUnlock()
	return path
}

// Wrap makes cmd, not yet started, run under the reaper, if there is one. A reaper
// forwards SIGINT to the command (a graceful cancel); SIGTERM, or the death of the thread
// that started it, kills the command and every process below it at once. Wrap sets
// cmd.SysProcAttr: the reaper leads a process group of its own, with the command in it.
// Without a reaper, cmd leads the group and is killed (SIGKILL) when its starter dies.
func Wrap(cmd *exec.Cmd) {
	p := Path()
	setProcAttr(cmd, p != "")
	if p == "" {
		return
	}
	cmd.Args = append([]string{p, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = p
}
