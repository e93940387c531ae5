package flux

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/source"
)

// Source-controllers before status.artifact.digest existed (v0.32 and older, with CRDs
// storing v1beta2) published only checksum: the sha256 hex of the tarball, or under
// v1beta1 a SHA-1. Such a status cannot be written through the envtest CRDs, which store
// v1 as current Flux does: the API server prunes checksum, absent from the v1 schema. So
// the object comes from a fake client here; the download and store are real.
func TestResolver_Resolve_VerifiesLegacyChecksum(t *testing.T) {
	body := project(t, "infra", "legacy")
	sha256Hex := strings.TrimPrefix(artifact.Digest(body), "sha256:")
	cases := []struct {
		name     string
		checksum string
		wantErr  string
	}{
		{name: "sha256 checksum of early v1beta2", checksum: sha256Hex},
		{name: "sha256 checksum of other content", checksum: strings.Repeat("0", 64), wantErr: "digest mismatch: "},
		{name: "SHA-1 checksum of v1beta1", checksum: strings.Repeat("ab", 20), wantErr: "is not a sha256 checksum"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			srv := newArtifactServer(t)
			obj := &unstructured.Unstructured{}
			obj.SetAPIVersion(v1beta2)
			obj.SetKind("GitRepository")
			obj.SetNamespace("ns")
			obj.SetName("infra")
			obj.SetUID("uid-1")
			obj.SetGeneration(1)
			art := artifactStatus(obj, srv.serve("/a.tar.gz", served{body: body}), "main/132f4e719209eb10b9485302f8593fc0e680f4fc", body)
			delete(art, "digest")
			delete(art, "size")
			art["checksum"] = tc.checksum
			obj.Object["status"] = readyStatus(obj, art)
			r := newResolver(t, srv, 1<<20)
			r.Client = fake.NewClientBuilder().
				WithRESTMapper(staticMapper(gvk("v1beta2", "GitRepository"))).
				WithObjects(obj).
				Build()

			got, err := r.Resolve(ctx, fluxStack("ns", "stack", v1beta2, "GitRepository", "infra", "infra"))
			if tc.wantErr != "" {
				wantFault(t, err, pulumiv1.ReasonSourceUnavailable, tc.wantErr != "digest mismatch: ", tc.wantErr)
				if r.Store.Has(artifact.Digest(body)) {
					t.Errorf("artifact stored despite %s", tc.name)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve() = %v", err)
			}
			want := source.Artifact{Revision: "main/132f4e719209eb10b9485302f8593fc0e680f4fc", Digest: artifact.Digest(body), Dir: "infra"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Resolve() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
