package pulumicount

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Counter is a counting bin directory.
type Counter struct {
	// Bin is the directory to run pulumi from. It is named bin, as the Automation API
	// insists, and links every other file of the real directory.
	Bin string
	log string
}

// New makes a counting copy of realBin under dir.
func New(realBin, dir string) (*Counter, error) {
	c := &Counter{Bin: filepath.Join(dir, "bin"), log: filepath.Join(dir, "pulumi-starts.log")}
	if err := os.MkdirAll(c.Bin, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create directory %s: %w", c.Bin, err)
	}
	entries, err := os.ReadDir(realBin)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", realBin, err)
	}
	for _, e := range entries {
		if e.Name() == "pulumi" {
			continue
		}
		if err := os.Symlink(filepath.Join(realBin, e.Name()), filepath.Join(c.Bin, e.Name())); err != nil {
			return nil, fmt.Errorf("failed to link %s: %w", e.Name(), err)
		}
	}
	// One line per start: the command's first two words ("up --yes", "stack init").
	script := fmt.Sprintf("#!/bin/sh\necho \"$1 $2\" >>'%s'\nexec '%s' \"$@\"\n", c.log, filepath.Join(realBin, "pulumi"))
	if err := os.WriteFile(filepath.Join(c.Bin, "pulumi"), []byte(script), 0o700); err != nil {
		return nil, fmt.Errorf("failed to write the pulumi shim: %w", err)
	}
	return c, nil
}

// Starts lists the pulumi processes started so far, oldest first, each as its first two
// arguments.
func (c *Counter) Starts() []string {
	b, err := os.ReadFile(c.log)
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// Count is how many pulumi processes have started so far.
func (c *Counter) Count() int {
	b, err := os.ReadFile(c.log)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}
