package metrics

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/stackwright/stackwright/internal/testing/repo"
)

// promtool reads plain rule files, so the PrometheusRule's groups are written out as one.
func writeRuleFile(t *testing.T, dir string) string {
	t.Helper()
	var rule struct {
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(repoFile(t, "config/prometheus/stackwright-rules.yaml"), &rule); err != nil {
		t.Fatalf("failed to parse the PrometheusRule: %v", err)
	}
	b, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		t.Fatalf("failed to render the rule file: %v", err)
	}
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := repo.Bin()
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.RequireBinaries(bin, "promtool"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), filepath.Join(bin, "promtool"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %v: %v\n%s", args, err, out)
	}
}

func TestAlertRules_Promtool_CheckRules(t *testing.T) {
	promtool(t, "check", "rules", "--lint=all", "--lint-fatal", writeRuleFile(t, t.TempDir()))
}

// The alerts' unit tests (testdata/alerts_test.yaml): each alert fires on the series it is
// about, after its `for`, with the labels and texts a receiver gets, and not on a healthy
// neighbour.
func TestAlertRules_Promtool_FireOnlyWhenTheyShould(t *testing.T) {
	dir := t.TempDir()
	writeRuleFile(t, dir)
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "alerts_test.yaml")
	if err := os.WriteFile(path, tests, 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, "test", "rules", path)
}
