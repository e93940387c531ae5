package repo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRequireBinaries_MissingOrNotExecutable_NamesThemAndMakeTools(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "present"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		bins    []string
		wantErr []string
	}{
		{name: "allPresent", bins: []string{"present"}},
		{name: "missing", bins: []string{"present", "absent"}, wantErr: []string{"absent", "make tools"}},
		{name: "notExecutable", bins: []string{"notexec"}, wantErr: []string{"notexec", "make tools"}},
		{name: "directory", bins: []string{"."}, wantErr: []string{"make tools"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := RequireBinaries(dir, tt.bins...)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("RequireBinaries() = %v; want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("RequireBinaries() = nil; want an error mentioning %v", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("RequireBinaries() = %q; want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestRoot_FromPackageDir_FindsMainModule(t *testing.T) {
	r, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r, "internal", "testing", "repo", "repo.go")); err != nil {
		t.Errorf("Root() = %s, which does not hold this package: %v", r, err)
	}
}

func TestSeeBuildInputs_Packages_StatsTheirSourcesOrFails(t *testing.T) {
	r, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		pkg     string
		wantErr string
	}{
		{name: "PackageOfTheModule", pkg: "./internal/version"},
		{name: "NoSuchPackage", pkg: "./internal/no-such-package", wantErr: "failed to list the sources of [./internal/no-such-package]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := SeeBuildInputs(r, "", tt.pkg)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("SeeBuildInputs() = %v; want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("SeeBuildInputs() = %v; want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestGoBuild_Package_BuildsItOrSaysWhy(t *testing.T) {
	r, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "pause")
	if err := GoBuild(t.Context(), r, "./hack/pause", out, ""); err != nil {
		t.Fatalf("GoBuild(./hack/pause) = %v; want nil", err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("GoBuild(./hack/pause) left no executable at %s: %v", out, err)
	}
	err = GoBuild(t.Context(), r, "./internal/no-such-package", out, "")
	if err == nil || !strings.Contains(err.Error(), "failed to list the sources of [./internal/no-such-package]") {
		t.Errorf("GoBuild(./internal/no-such-package) = %v; want the listing's failure", err)
	}
}
