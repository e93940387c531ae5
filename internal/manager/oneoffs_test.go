package manager

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
)

// A cluster whose auto.pulumi.com Update CRD was not applied (a chart upgrade installs no
// new CRD) still gets a manager, without one-off operations; one with it serves them.
func TestServesOneOffs_FollowsTheCRD(t *testing.T) {
	for _, tc := range []struct {
		name      string
		installed bool
	}{{"installed", true}, {"absent", false}} {
		t.Run(tc.name, func(t *testing.T) {
			mapper := meta.NewDefaultRESTMapper(nil)
			if tc.installed {
				mapper.Add(autov1alpha1.GroupVersion.WithKind("Update"), meta.RESTScopeNamespace)
			}
			mapper.Add(schema.GroupVersionKind{Group: "stackwright.dev", Version: "v1alpha1", Kind: "Update"}, meta.RESTScopeNamespace)
			got, err := servesOneOffs(mapper)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.installed {
				t.Errorf("servesOneOffs() = %v; want %v", got, tc.installed)
			}
		})
	}
}
