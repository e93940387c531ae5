package repo

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const module = "github.com/stackwright/stackwright/"

// layerRule forbids the packages under from to import the packages under any of to.
type layerRule struct {
	why      string
	from, to []string
}

// layers are the floors of the code base (docs/development.md, "Layout"): what may import
// what. Paths are relative to the module; a path names that package and those below it.
var layers = []layerRule{
	{
		why:  "the API is the floor every other package stands on; it imports nothing of the implementation",
		from: []string{"api"},
		to:   []string{"internal", "cmd", "test", "bench"},
	},
	{
		why:  "controllers decide and record; they hand work to an executor through internal/executor's interfaces, never to a concrete one",
		from: []string{"internal/controller"},
		to:   []string{"internal/executor/job", "internal/executor/local"},
	},
	{
		why:  "executors run what controllers decided; they never reach back into a controller",
		from: []string{"internal/executor"},
		to:   []string{"internal/controller"},
	},
	{
		why:  "the platform controllers reach Stacks only through the API, as any client would",
		from: []string{"internal/controller/stacktemplate", "internal/controller/instance", "internal/controller/stackset", "internal/controller/rollout"},
		to:   []string{"internal/controller/stack", "internal/controller/update", "internal/controller/program"},
	},
}

// under reports whether pkg (relative to the module) is path or below it.
func under(pkg, path string) bool { return pkg == path || strings.HasPrefix(pkg, path+"/") }

// The layers hold: every forbidden import found is listed (none today).
func TestLayers_Imports_NoPackageReachesAcrossItsFloor(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	// The code the product is built from: tests may use the test harnesses of any floor.
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var leaks []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			continue
		}
		for _, imp := range slices.Compact(slices.Sorted(slices.Values(fields[1:]))) {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			for _, r := range layers {
				from := slices.ContainsFunc(r.from, func(p string) bool { return under(pkg, p) })
				to := slices.ContainsFunc(r.to, func(p string) bool { return under(dep, p) })
				// A package's own subpackages are its business (internal/controller/stack
				// and its decide package).
				if from && to && !under(dep, pkg) {
					leaks = append(leaks, pkg+" imports "+dep+": "+r.why)
				}
			}
		}
	}
	if diff := cmp.Diff([]string(nil), leaks); diff != "" {
		t.Errorf("imports across the layers (-want +got):\n%s", diff)
	}
}

// The rules are what the test checks: a leak planted in a fake listing is found.
func TestLayers_Rules_FindAPlantedLeak(t *testing.T) {
	for _, tc := range []struct{ pkg, dep string }{
		{"api/v1alpha1", "internal/controller/conditions"},
		{"internal/controller/update", "internal/executor/job"},
		{"internal/executor/job", "internal/controller/stack"},
		{"internal/controller/rollout", "internal/controller/stack"},
	} {
		found := slices.ContainsFunc(layers, func(r layerRule) bool {
			return slices.ContainsFunc(r.from, func(p string) bool { return under(tc.pkg, p) }) &&
				slices.ContainsFunc(r.to, func(p string) bool { return under(tc.dep, p) })
		})
		if !found {
			t.Errorf("%s importing %s breaks no rule", tc.pkg, tc.dep)
		}
	}
}
