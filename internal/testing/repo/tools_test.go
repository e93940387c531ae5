package repo

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// requirements reads a go.mod's requirements, direct and indirect, as module → version.
func requirements(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax(path, data, nil)
	if err != nil {
		t.Fatalf("failed to parse %s: %v", path, err)
	}
	reqs := make(map[string]string, len(f.Require))
	for _, r := range f.Require {
		reqs[r.Mod.Path] = r.Mod.Version
	}
	return reqs
}

// Go's build cache shares a compiled package between two builds only when every
// dependency's version matches, so the modules hack/tools.sh builds after the pulumi CLI
// pin its versions: a cold CI run then compiles the Pulumi SDK and the cloud SDKs once.
// stackwright-unlock must also open a backend's bucket as that CLI does, with the same
// gocloud.dev.
func TestToolModules_BuiltBesidePulumi_PinItsVersions(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	pulumi := requirements(t, filepath.Join(root, "hack", "tools", "pulumi", "go.mod"))
	for _, mod := range []string{"test/provider", "cmd/stackwright-unlock"} {
		t.Run(mod, func(t *testing.T) {
			shared := 0
			for path, v := range requirements(t, filepath.Join(root, mod, "go.mod")) {
				want, ok := pulumi[path]
				if !ok {
					continue
				}
				shared++
				if v != want {
					t.Errorf("%s requires %s %s; the pulumi tool (hack/tools/pulumi/go.mod) has %s", mod, path, v, want)
				}
			}
			if shared == 0 {
				t.Errorf("%s shares no module with the pulumi tool", mod)
			}
		})
	}
}
