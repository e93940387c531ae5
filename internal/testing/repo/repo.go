package repo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

const modulePath = "module github.com/stackwright/stackwright\n"

var root = sync.OnceValues(func() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("failed to get working directory: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && len(b) >= len(modulePath) && string(b[:len(modulePath)]) == modulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("failed to find the stackwright checkout: no go.mod declaring github.com/stackwright/stackwright above the working directory")
		}
		dir = parent
	}
})

// Root returns the absolute path of the checkout (the directory holding the main go.mod).
func Root() (string, error) { return root() }

// Bin returns the directory `make tools` builds into.
func Bin() (string, error) {
	r, err := root()
	if err != nil {
		return "", err
	}
	return filepath.Join(r, "bin"), nil
}

// RequireBinaries returns an error naming every missing binary in dir and telling the
// reader how to build them, so a fresh checkout fails with an instruction, not a stack trace.
func RequireBinaries(dir string, names ...string) error {
	var missing []string
	for _, n := range names {
		if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %v in %s: run `make tools` first (it builds them from the Go module proxy)", missing, dir)
	}
	return nil
}
