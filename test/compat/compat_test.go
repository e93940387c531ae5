package compat_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

// manifest is one case of the suite: a testdata file and what creating it must do.
type manifest struct {
	// name is the file name without .yaml; it is also the object's metadata.name, which
	// keeps the objects of one namespace apart and a failure easy to trace to its file.
	name   string
	obj    *unstructured.Unstructured
	header header
}

// readManifests reads every testdata/*.yaml file: one object and its header each.
func readManifests(t *testing.T) []manifest {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("testdata holds no manifests")
	}
	var ms []manifest
	for _, p := range paths {
		m, err := readManifest(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		ms = append(ms, m)
	}
	if t.Failed() {
		t.FailNow()
	}
	return ms
}

func readManifest(path string) (manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return manifest{}, fmt.Errorf("failed to read manifest: %w", err)
	}
	h, err := parseHeader(string(b))
	if err != nil {
		return manifest{}, err
	}
	docs, err := kubetest.ReadDocs(path)
	if err != nil {
		return manifest{}, err
	}
	// One object per file, so that the expectation is unambiguous about what it judges.
	if len(docs) != 1 {
		return manifest{}, fmt.Errorf("failed to read manifest: it holds %d objects; want exactly one", len(docs))
	}
	name := strings.TrimSuffix(filepath.Base(path), ".yaml")
	if got := docs[0].GetName(); got != name {
		return manifest{}, fmt.Errorf("failed to read manifest: metadata.name is %q; want the file's name %q", got, name)
	}
	if strings.HasPrefix(name, kubetest.GuidanceProbePrefix) {
		return manifest{}, fmt.Errorf("failed to read manifest: names starting with %q are the policy probes'", kubetest.GuidanceProbePrefix)
	}
	if docs[0].GetNamespace() != "" {
		return manifest{}, fmt.Errorf("failed to read manifest: it sets metadata.namespace; the test chooses the namespace")
	}
	return manifest{name: name, obj: docs[0], header: h}, nil
}

// The acceptance rule, checked on the expectations themselves: a manifest that
// PKO's CRD schema admits must be admitted by Stackwright's. (Stackwright may admit more:
// a manifest PKO rejects may be admitted, e.g. a Stackwright-only field.)
func TestHeaders_Check_EveryPKOAdmittedManifestIsExpectedAdmitted(t *testing.T) {
	for _, m := range readManifests(t) {
		if m.header.pko == admitted && m.header.expect.Result != admitted {
			t.Errorf("%s: PKO admits it, so Stackwright must too; the header expects %q", m.name, m.header.expect.Result)
		}
	}
}

// Each manifest is created, as `kubectl apply` would with its default strict field
// validation, in a namespace to which the install's guidance policy is bound, and must be
// admitted or rejected as its header says, drawing exactly the warnings it lists.
func TestCompat_Create_PKOManifests(t *testing.T) {
	manifests := readManifests(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	c := env.WarningClient(t)
	ns := env.Namespace(t)
	kubetest.InstallGuidance(ctx, t, c, ns)

	for _, m := range manifests {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			obj := m.obj.DeepCopy()
			obj.SetNamespace(ns)
			w := &kubetest.Warnings{}
			err := c.Create(kubetest.WithWarnings(ctx, w), obj, client.FieldValidation("Strict"))
			warnings := w.Get()
			want := m.header.expect
			if diff := cmp.Diff(want, observe(want, err, warnings), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("outcome (-want +got):\n%s\nerror: %v\nwarnings: %q", diff, err, warnings)
			}
		})
	}
}
