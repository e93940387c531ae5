package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/stackwright/stackwright/internal/testing/repo"
)

func TestRun_Archives_ReproducibleWithTheirChecksums(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kubectl-stackwright")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho plugin\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var manifests [][]byte
	for range 2 {
		out := t.TempDir()
		if err := run(out, "v1.2.3", "", []string{"linux/amd64=" + bin, "windows/amd64=" + bin}); err != nil {
			t.Fatal(err)
		}
		m, err := os.ReadFile(filepath.Join(out, "stackwright.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		manifests = append(manifests, m)
	}
	if !bytes.Equal(manifests[0], manifests[1]) {
		t.Errorf("two runs on the same binaries gave different manifests:\n%s\n%s", manifests[0], manifests[1])
	}
	var got plugin
	if err := yaml.UnmarshalStrict(manifests[0], &got); err != nil {
		t.Fatal(err)
	}
	var uris, bins []string
	for _, p := range got.Spec.Platforms {
		uris, bins = append(uris, p.URI), append(bins, p.Bin)
		if len(p.SHA256) != 64 {
			t.Errorf("platform %v: sha256 %q", p.Selector.MatchLabels, p.SHA256)
		}
	}
	wantURIs := []string{
		releases + "/v1.2.3/kubectl-stackwright_linux_amd64.tar.gz",
		releases + "/v1.2.3/kubectl-stackwright_windows_amd64.tar.gz",
	}
	if diff := cmp.Diff(wantURIs, uris); diff != "" {
		t.Errorf("uris (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"kubectl-stackwright", "kubectl-stackwright.exe"}, bins); diff != "" {
		t.Errorf("bins (-want +got):\n%s", diff)
	}
}

func TestRun_Arguments_RejectedWithTheReason(t *testing.T) {
	tests := []struct {
		name    string
		version string
		args    []string
		want    string
	}{
		{"versionWithoutV", "1.2.3", []string{"linux/amd64=x"}, "invalid version"},
		{"noBinaries", "v1.2.3", nil, "no binaries given"},
		{"platformWithoutArch", "v1.2.3", []string{"linux=x"}, "want os/arch=path"},
		{"missingBinary", "v1.2.3", []string{"linux/amd64=" + filepath.Join(t.TempDir(), "none")}, "failed to read linux/amd64 binary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t.TempDir(), tt.version, "", tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run() = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

// krew itself installs the plugin from the manifest and this platform's archive, checking
// the archive against the manifest's sha256, and the installed plugin runs.
func TestRun_Krew_InstallsAndRunsThePlugin(t *testing.T) {
	bins, err := repo.Bin()
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.RequireBinaries(bins, "krew"); err != nil {
		t.Fatal(err)
	}
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plugin := filepath.Join(dir, "kubectl-stackwright")
	if err := repo.GoBuild(t.Context(), root, "./cmd/kubectl-stackwright", plugin, ""); err != nil {
		t.Fatal(err)
	}
	host := runtime.GOOS + "/" + runtime.GOARCH
	out := filepath.Join(dir, "krew")
	// The other platform's archive holds this binary too: only the host's is installed.
	if err := run(out, "v0.1.0", "", []string{host + "=" + plugin, "darwin/arm64=" + plugin}); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(out, "stackwright.yaml")
	archive := filepath.Join(out, "kubectl-stackwright_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz")
	krew := func(root string, args ...string) (string, error) {
		cmd := exec.CommandContext(t.Context(), filepath.Join(bins, "krew"), args...)
		cmd.Env = append(os.Environ(), "KREW_ROOT="+root, "KREW_NO_UPGRADE_CHECK=1", "HOME="+dir)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	krewRoot := filepath.Join(dir, "root")
	if out, err := krew(krewRoot, "install", "--manifest="+manifest, "--archive="+archive); err != nil {
		t.Fatalf("krew install: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(krewRoot, "receipts", "stackwright.yaml")); err != nil {
		t.Errorf("krew kept no receipt of the install: %v", err)
	}
	help, err := exec.CommandContext(t.Context(), filepath.Join(krewRoot, "bin", "kubectl-stackwright"), "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "Work with Stackwright Stacks") {
		t.Errorf("installed plugin --help: %v\n%s", err, help)
	}

	// An archive that is not the one the manifest names is refused.
	other := filepath.Join(dir, "other.tar.gz")
	if err := os.WriteFile(other, append(mustRead(t, archive), 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := krew(filepath.Join(dir, "root2"), "install", "--manifest="+manifest, "--archive="+other); err == nil || !strings.Contains(out, "checksum") {
		t.Errorf("krew install of an archive the manifest does not name: %v\n%s", err, out)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
