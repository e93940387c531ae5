package job

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/reaper"
)

func TestCopyProgram_CopiesTreeAndLinks(t *testing.T) {
	src := t.TempDir()
	for name, content := range map[string]string{
		"Pulumi.yaml":               "name: baked\nruntime: yaml\n",
		"lib/index.js":              "module.exports = 1\n",
		"node_modules/x/bin/cli.js": "#!/usr/bin/env node\n",
	} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(src, "node_modules", ".bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../x/bin/cli.js", filepath.Join(src, "node_modules", ".bin", "x")); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "work")
	if err := copyProgram(src, dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dst, "node_modules", ".bin", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("#!/usr/bin/env node\n", string(got)); diff != "" {
		t.Errorf("file through the copied link (-want +got):\n%s", diff)
	}
	// The engine writes Pulumi.<stack>.yaml beside Pulumi.yaml: the copy must be writable.
	if err := os.WriteFile(filepath.Join(dst, "Pulumi.dev.yaml"), []byte("config: {}\n"), 0o600); err != nil {
		t.Errorf("work tree not writable: %v", err)
	}
}

func TestCopyProgram_MissingDirSaysWhere(t *testing.T) {
	err := copyProgram("/nonexistent/share/source", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/share/source in the image") {
		t.Fatalf("copyProgram of a missing dir: %v; want an error naming the image path", err)
	}
}

func TestInstallBinary_CopiesRunningExecutableReaperAndUnlock(t *testing.T) {
	self, _ := os.Executable()
	// As in the runner image, stackwright-unlock next to the executable.
	unlock := filepath.Join(filepath.Dir(self), engine.UnlockName)
	if err := os.WriteFile(unlock, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(unlock) })
	dest := filepath.Join(t.TempDir(), "stackwright")
	if err := InstallBinary(dest); err != nil {
		t.Fatal(err)
	}
	for src, dst := range map[string]string{
		self:          dest,
		reaper.Path(): filepath.Join(filepath.Dir(dest), reaper.Name),
		unlock:        filepath.Join(filepath.Dir(dest), engine.UnlockName),
	} {
		want, err := os.Stat(src)
		if err != nil {
			t.Fatalf("%s: %v (TestMain installs a reaper)", src, err)
		}
		got, err := os.Stat(dst)
		if err != nil {
			t.Fatal(err)
		}
		if got.Size() != want.Size() || got.Mode().Perm()&0o111 == 0 {
			t.Errorf("installed %s: size %d mode %v; want size %d, executable", dst, got.Size(), got.Mode(), want.Size())
		}
	}
}
