package main

import (
	"cmp"
	"debug/elf"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stackwright/stackwright/internal/testing/repo"
)

func TestCheckStatic_CheckStatic_RefusesWhatCannotRunWithoutLibc(t *testing.T) {
	dir := t.TempDir()
	static := filepath.Join(dir, "pause")
	if err := repo.GoBuild(t.Context(), ".", "../pause", static, ""); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "script")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	other := filepath.Join(dir, "pause-other")
	otherArch := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	if err := repo.GoBuild(t.Context(), ".", "../pause", other, "", "GOARCH="+otherArch); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		path string
		arch string // "" for this program's
		want string // "" for success
		is   error
	}{
		{name: "static", path: static},
		{name: "static for another architecture", path: other, want: "built for"},
		{name: "static, checked for its own architecture", path: other, arch: otherArch},
		{name: "an architecture images are not built for", path: static, arch: "riscv64", want: "no image architecture"},
		{name: "dynamic", path: dynamicBinary(t), want: "dynamically linked"},
		{name: "not ELF", path: text, want: "failed to read " + text + " as an ELF binary"},
		{name: "missing", path: filepath.Join(dir, "nope"), want: "failed to open", is: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkStaticFor(tt.path, cmp.Or(tt.arch, runtime.GOARCH))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("checkStatic(%s) = %v; want nil", tt.path, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("checkStatic(%s) = %v; want an error containing %q", tt.path, err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("checkStatic(%s) = %v; want errors.Is(err, %v)", tt.path, err, tt.is)
			}
		})
	}
}

// dynamicBinary finds a dynamically linked executable on the host, which any distribution's
// coreutils are.
func dynamicBinary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/bin/ls", "/usr/bin/ls", "/bin/cat", "/usr/bin/env"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				f.Close()
				return p
			}
		}
		f.Close()
	}
	t.Skip("no dynamically linked executable on this host")
	return ""
}
