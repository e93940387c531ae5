package repo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The suites check for their tools before go test starts watching what they read, so only
// hack/testcache.sh (run by make unit) makes a new tool re-run them: it must clear the
// cached results exactly when a native tool's stamp changed.
func TestTestcache_Run_ClearsResultsWhenAToolChanged(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "hack", "testcache.sh"))
	if err != nil {
		t.Fatal(err)
	}
	checkout, cache := t.TempDir(), t.TempDir()
	stamps := filepath.Join(checkout, "bin", ".stamps")
	write := func(path, data string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(checkout, "hack", "testcache.sh"), string(script), 0o755)
	write(filepath.Join(stamps, "pulumi"), "1111\n", 0o644)
	write(filepath.Join(stamps, "k8s"), "2222\n", 0o644)
	write(filepath.Join(stamps, "linux-arm64", "pulumi"), "3333\n", 0o644)

	// go clean -testcache records when it ran in testexpire.txt; results older are unused.
	expiry := func() string {
		b, err := os.ReadFile(filepath.Join(cache, "testexpire.txt"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, step := range []struct {
		name, change string
		wantCleared  bool
	}{
		{name: "first run: no sum recorded", wantCleared: true},
		{name: "nothing changed"},
		{name: "a native tool was rebuilt", change: filepath.Join(stamps, "pulumi"), wantCleared: true},
		{name: "a cross-compiled tool was rebuilt (the tests never run it)", change: filepath.Join(stamps, "linux-arm64", "pulumi")},
		{name: "a tool was added", change: filepath.Join(stamps, "helm"), wantCleared: true},
	} {
		if step.change != "" {
			write(step.change, "changed\n", 0o644)
		}
		before := expiry()
		cmd := exec.Command(filepath.Join(checkout, "hack", "testcache.sh"))
		cmd.Env = append(os.Environ(), "GOCACHE="+cache)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: hack/testcache.sh: %v\n%s", step.name, err, out)
		}
		cleared := expiry() != before
		if cleared != step.wantCleared || strings.Contains(string(out), "clearing") != step.wantCleared {
			t.Errorf("%s: cleared = %v, printed %q; want cleared = %v", step.name, cleared, out, step.wantCleared)
		}
	}
}
