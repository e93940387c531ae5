package repo

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/mod/modfile"
)

// AlignedModules are the Go modules, relative to the checkout, that require one version of
// every module they share: Go's build cache shares a compiled package between two builds
// only when the package and every dependency are at the same version and built with the
// same flags, and these are the builds whose dependencies overlap most (client-go, gRPC,
// OpenTelemetry, the Pulumi SDK, the cloud SDKs). hack/align-modules keeps them so.
var AlignedModules = []string{".", "hack/tools/k8s", "hack/tools/pulumi", "hack/tools/pulumi-yaml", "test/provider", "cmd/stackwright-unlock"}

// Requirements reads the go.mod in dir (relative to the checkout root) as module → the
// version a build uses, direct and indirect: a replace directive's version where one
// points the module at another version of itself (Kubernetes' staging modules, required
// as v0.0.0), and without modules replaced by a directory or another module. pinned names
// the modules whose version is a replace directive's. A tidy go.mod requires every module
// that provides a package its builds may compile, for any platform.
func Requirements(root, dir string) (versions map[string]string, pinned map[string]bool, err error) {
	path := filepath.Join(root, dir, "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read %s: %w", path, err)
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to parse %s: %w", path, err)
	}
	versions = make(map[string]string, len(f.Require))
	for _, r := range f.Require {
		versions[r.Mod.Path] = r.Mod.Version
	}
	pinned = map[string]bool{}
	for _, r := range f.Replace {
		if _, required := versions[r.Old.Path]; !required {
			continue
		}
		if r.New.Path == r.Old.Path && r.New.Version != "" && r.Old.Version == "" {
			versions[r.Old.Path] = r.New.Version
			pinned[r.Old.Path] = true
		} else {
			delete(versions, r.Old.Path)
		}
	}
	return versions, pinned, nil
}
