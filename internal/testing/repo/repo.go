package repo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// SeeBuildInputs stats every source file the packages pkgs (built in dir with the build
// tags tags) are compiled from, standard library aside. A test that runs `go build` for a
// binary calls it, or GoBuild: `go test` reuses a cached result while the files the test
// process itself opened or stat'ed are unchanged, and it never sees what a child `go build`
// reads. (Nor what TestMain reads before m.Run: call it from a test.)
func SeeBuildInputs(dir, tags string, pkgs ...string) error {
	return seeBuildInputs(dir, os.Environ(), tags, pkgs...)
}

func seeBuildInputs(dir string, env []string, tags string, pkgs ...string) error {
	args := append([]string{"list", "-deps", "-tags", tags, "-f",
		`{{if not .Standard}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("failed to list the sources of %v: %w", pkgs, err)
	}
	for f := range strings.Lines(string(out)) {
		if _, err := os.Stat(strings.TrimSuffix(f, "\n")); err != nil {
			return fmt.Errorf("failed to stat a source of %v: %w", pkgs, err)
		}
	}
	return nil
}

// GoBuild builds package pkg (a path relative to dir) into out, statically and -trimpath
// as make build and a release do (so the tests run what ships, and share its compiled
// packages), with the build tags tags and env (GOOS, GOARCH, ...) added to the
// environment, after seeing its sources for the same platform and tags (SeeBuildInputs).
func GoBuild(ctx context.Context, dir, pkg, out, tags string, env ...string) error {
	env = append(append(os.Environ(), "CGO_ENABLED=0"), env...)
	if err := seeBuildInputs(dir, env, tags, pkg); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", tags, "-o", out, pkg)
	cmd.Dir, cmd.Env = dir, env
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("failed to build %s: %w\n%s", pkg, err, b)
	}
	return nil
}
