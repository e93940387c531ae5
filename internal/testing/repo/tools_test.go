package repo

import (
	"testing"
)

// A bump in one of the aligned modules that leaves another behind makes a cold CI run
// compile everything above the differing module twice; stackwright-unlock must also open
// a backend's bucket as the pulumi CLI does, with the same gocloud.dev.
func TestModules_BuiltTogether_RequireOneVersion(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	reqs := map[string]map[string]string{}
	for _, dir := range AlignedModules {
		if reqs[dir], _, err = Requirements(root, dir); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range AlignedModules {
		for _, b := range AlignedModules[i+1:] {
			shared := 0
			for path, va := range reqs[a] {
				vb, ok := reqs[b][path]
				if !ok {
					continue
				}
				shared++
				if va != vb {
					t.Errorf("%s requires %s %s, %s requires %s: run go run ./hack/align-modules", a, path, va, b, vb)
				}
			}
			if shared == 0 {
				t.Errorf("%s and %s share no module: are both still built?", a, b)
			}
		}
	}
}
