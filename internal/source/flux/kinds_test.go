package flux

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

func gvk(version, kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: Group, Version: version, Kind: kind}
}

// staticMapper serves exactly the given kinds, as a cluster with an older Flux would.
func staticMapper(kinds ...schema.GroupVersionKind) meta.RESTMapper {
	var gvs []schema.GroupVersion
	for _, k := range kinds {
		gvs = append(gvs, k.GroupVersion())
	}
	m := meta.NewDefaultRESTMapper(gvs)
	for _, k := range kinds {
		m.Add(k, meta.RESTScopeNamespace)
	}
	return m
}

// brokenMapper fails like discovery against an unreachable API server.
type brokenMapper struct{ meta.RESTMapper }

func (brokenMapper) RESTMapping(schema.GroupKind, ...string) (*meta.RESTMapping, error) {
	return nil, errors.New("connection refused")
}

// Watchable lists one version per installed kind, preferring v1, and nothing where Flux is
// absent; the mappers come from the envtest API server's discovery before, during and after
// the Flux CRDs were installed, plus a static one for a cluster serving only v1beta2.
func TestWatchable_ReturnsInstalledKinds(t *testing.T) {
	cases := []struct {
		name   string
		mapper meta.RESTMapper
		want   []schema.GroupVersionKind
	}{
		{name: "no Flux CRDs", mapper: mapperWithoutFlux, want: nil},
		{name: "GitRepository only", mapper: mapperWithGitRepositoryOnly, want: []schema.GroupVersionKind{gvk("v1", "GitRepository")}},
		{name: "all installed (the client's lazy mapper)", mapper: env.Client.RESTMapper(), want: []schema.GroupVersionKind{
			gvk("v1", "GitRepository"), gvk("v1", "OCIRepository"), gvk("v1", "Bucket"),
		}},
		{name: "OCIRepository before Flux 2.6 served only v1beta2",
			mapper: staticMapper(gvk("v1", "GitRepository"), gvk("v1beta2", "GitRepository"), gvk("v1beta2", "OCIRepository")),
			want:   []schema.GroupVersionKind{gvk("v1", "GitRepository"), gvk("v1beta2", "OCIRepository")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Watchable(tc.mapper)
			if err != nil {
				t.Fatalf("Watchable() = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Watchable() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A discovery failure is an error, not "Flux is not installed": a manager must not start
// without watches it needs because the API server hiccuped.
func TestWatchable_FailsWhenDiscoveryFails(t *testing.T) {
	if got, err := Watchable(brokenMapper{}); err == nil {
		t.Errorf("Watchable() = %v, nil; want an error", got)
	}
}

func TestKinds_ListsBothVersionsOfEachKind(t *testing.T) {
	want := []schema.GroupVersionKind{
		gvk("v1", "GitRepository"), gvk("v1beta2", "GitRepository"),
		gvk("v1", "OCIRepository"), gvk("v1beta2", "OCIRepository"),
		gvk("v1", "Bucket"), gvk("v1beta2", "Bucket"),
	}
	if diff := cmp.Diff(want, Kinds()); diff != "" {
		t.Errorf("Kinds() mismatch (-want +got):\n%s", diff)
	}
}

// A Stack's key equals the key of the object it references, whichever version either side
// uses, so a watch on one version finds Stacks written against the other.
func TestIndexKey_MatchesObjectIndexKey(t *testing.T) {
	object := func(apiVersion, kind, name string) client.Object {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetName(name)
		return u
	}
	stacks := []struct {
		name string
		key  string
	}{
		{name: "v1 GitRepository", key: IndexKey(fluxStack("ns", "s", v1, "GitRepository", "infra", ""))},
		{name: "v1beta2 GitRepository", key: IndexKey(fluxStack("ns", "s", v1beta2, "GitRepository", "infra", "dir"))},
		{name: "v1 object", key: ObjectIndexKey(object(v1, "GitRepository", "infra"))},
		{name: "v1beta2 object", key: ObjectIndexKey(object(v1beta2, "GitRepository", "infra"))},
	}
	for _, s := range stacks {
		if s.key != "GitRepository/infra" {
			t.Errorf("%s: key = %q; want %q", s.name, s.key, "GitRepository/infra")
		}
	}

	none := []struct {
		name string
		key  string
	}{
		{name: "Stack without fluxSource", key: IndexKey(fluxStackWithout())},
		{name: "Stack with an unsupported kind", key: IndexKey(fluxStack("ns", "s", v1, "HelmChart", "infra", ""))},
		{name: "Stack with another group", key: IndexKey(fluxStack("ns", "s", "example.com/v1", "GitRepository", "infra", ""))},
		{name: "HelmChart object", key: ObjectIndexKey(object(v1, "HelmChart", "infra"))},
		{name: "object of another group", key: ObjectIndexKey(object("example.com/v1", "GitRepository", "infra"))},
	}
	for _, s := range none {
		if s.key != "" {
			t.Errorf("%s: key = %q; want none", s.name, s.key)
		}
	}
}

func fluxStackWithout() *pulumiv1.Stack {
	s := fluxStack("ns", "s", v1, "GitRepository", "infra", "")
	s.Spec.FluxSource = nil
	return s
}
