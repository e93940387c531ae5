package reapertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stackwright/stackwright/internal/reaper"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// Build builds cmd/stackwright-reaper into dir and returns its path.
func Build(dir string) (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, reaper.Name)
	cmd := exec.Command("go", "build", "-o", out, "./cmd/stackwright-reaper")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("failed to build %s: %w\n%s", reaper.Name, err, b)
	}
	return out, nil
}

// Install builds the reaper into a temporary directory and has the engine start every CLI
// under it (reaper.Use). Call it from TestMain; the returned function undoes it.
func Install() (func(), error) {
	dir, err := os.MkdirTemp("", "stackwright-reaper-")
	if err != nil {
		return nil, fmt.Errorf("failed to create a directory for the reaper: %w", err)
	}
	path, err := Build(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	reaper.Use(path)
	return func() {
		reaper.Use("")
		_ = os.RemoveAll(dir)
	}, nil
}

// Run is TestMain for a package whose tests start the engine outside kubetest.Main: it
// installs the reaper, runs the tests, and returns their exit code.
func Run(m *testing.M) int {
	done, err := Install()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer done()
	return m.Run()
}
