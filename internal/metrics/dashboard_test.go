package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"
)

// exported are the names of the metrics this package serves, from the collectors' own
// descriptions.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	cs := []prometheus.Collector{driftChecks, driftDetected, updateDuration, updates, engineCPU, retries,
		locksHealed, sourceDuration, sourceErrors, &stackCollector{}, &executorCollector{}, rolloutWave, rolloutHalted, rolloutPhase}
	fq := regexp.MustCompile(`fqName: "([a-z_:]+)"`)
	names := map[string]bool{}
	for _, c := range cs {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fq.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read the name of %s", d)
			}
			names[m[1]] = true
		}
	}
	return names
}

var metricRef = regexp.MustCompile(`\bstackwright_[a-z_]+`)

// unknownMetrics lists the stackwright_ metrics expr refers to that are not served.
func unknownMetrics(expr string, names map[string]bool) []string {
	var out []string
	for _, ref := range metricRef.FindAllString(expr, -1) {
		base := ref
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(ref, suffix); ok && names[b] {
				base = b
			}
		}
		if !names[base] {
			out = append(out, ref)
		}
	}
	return out
}

func repoFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDashboard_Panels_ReferOnlyToServedMetrics(t *testing.T) {
	names := exported(t)
	raw := repoFile(t, "config/grafana/stackwright-dashboard.json")
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	if dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("the dashboard has no uid or no panels")
	}
	var ids []int
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if slices.Contains(ids, p.ID) {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids = append(ids, p.ID)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if q.Expr == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			if bad := unknownMetrics(q.Expr, names); len(bad) > 0 {
				t.Errorf("panel %q queries metrics the manager does not serve: %v", p.Title, bad)
			}
			for _, ref := range metricRef.FindAllString(q.Expr, -1) {
				used[ref] = true
			}
		}
	}
	for _, v := range dash.Templating.List {
		if bad := unknownMetrics(v.Definition, names); len(bad) > 0 {
			t.Errorf("variable %q queries metrics the manager does not serve: %v", v.Definition, bad)
		}
	}
	if len(used) == 0 {
		t.Error("no panel queries a stackwright_ metric")
	}
	if chart := repoFile(t, "charts/stackwright/files/stackwright-dashboard.json"); string(chart) != string(raw) {
		t.Error("the chart's copy of the dashboard is stale: run make manifests")
	}
}

func TestAlertRules_Rules_AreCompleteAndReferToServedMetrics(t *testing.T) {
	names := exported(t)
	raw := repoFile(t, "config/prometheus/stackwright-rules.yaml")
	var rule struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Alert       string            `json:"alert"`
					Expr        string            `json:"expr"`
					For         string            `json:"for"`
					Labels      map[string]string `json:"labels"`
					Annotations map[string]string `json:"annotations"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(raw, &rule); err != nil {
		t.Fatalf("the rules do not parse: %v", err)
	}
	if rule.Kind != "PrometheusRule" || len(rule.Spec.Groups) == 0 {
		t.Fatalf("want a PrometheusRule with groups, got kind %q", rule.Kind)
	}
	seen := map[string]bool{}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			switch {
			case r.Alert == "" || seen[r.Alert]:
				t.Errorf("alert name %q is empty or repeated", r.Alert)
			case !slices.Contains([]string{"info", "warning", "critical"}, r.Labels["severity"]):
				t.Errorf("alert %s: severity %q, want info, warning or critical", r.Alert, r.Labels["severity"])
			case r.Annotations["summary"] == "":
				t.Errorf("alert %s has no summary", r.Alert)
			}
			seen[r.Alert] = true
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			if bad := unknownMetrics(r.Expr, names); len(bad) > 0 || !metricRef.MatchString(r.Expr) {
				t.Errorf("alert %s queries metrics the manager does not serve (or none of its own): %v", r.Alert, bad)
			}
		}
	}
	if chart := repoFile(t, "charts/stackwright/files/stackwright-rules.yaml"); string(chart) != string(raw) {
		t.Error("the chart's copy of the rules is stale: run make manifests")
	}
}
