package program_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/controller/program"
	"github.com/stackwright/stackwright/internal/source/program/project"
	"github.com/stackwright/stackwright/internal/testing/statustest"
)

func js(s string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(s)} }

func filesSpec(content string) pulumiv1.ProgramSpec {
	return pulumiv1.ProgramSpec{
		Configuration: map[string]pulumiv1.Configuration{"message": {Type: "String", Default: &apiextensionsv1.JSON{Raw: []byte(`"hello"`)}}},
		Resources: map[string]pulumiv1.Resource{
			"greeting": {Type: "stackwright-testing:index:File", Properties: map[string]apiextensionsv1.JSON{
				"path": js(`"greeting.txt"`), "content": js(content),
			}},
		},
		Outputs: map[string]apiextensionsv1.JSON{"digest": js(`"${greeting.sha256}"`)},
	}
}

func newProgram(name string, spec pulumiv1.ProgramSpec) *pulumiv1.Program {
	return &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: name}, Program: spec}
}

// packed computes, without the controller, the tarball and digest a Program must get.
func packed(t *testing.T, p *pulumiv1.Program) ([]byte, string) {
	t.Helper()
	files, err := project.Pack(p)
	if err != nil {
		t.Fatal(err)
	}
	tarball, err := artifact.Pack(files)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tarball)
	return tarball, "sha256:" + hex.EncodeToString(sum[:])
}

// checkObserved fails the test unless the Program's status says it handled generation.
func checkObserved(t *testing.T, p *pulumiv1.Program, generation int64) {
	t.Helper()
	if p.Status.ObservedGeneration != generation {
		t.Fatalf("status.observedGeneration = %d; want %d", p.Status.ObservedGeneration, generation)
	}
}

func TestReconciler_Reconcile_RendersProgramIntoStore(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	got := newProgram("files", filesSpec(`"${message}"`))
	s.Create(got)

	s.WaitCondition(got, pulumiv1.ConditionReady, metav1.ConditionTrue, "")
	checkObserved(t, got, 1)

	tarball, digest := packed(t, got)
	if got.Status.Artifact == nil || got.Status.Artifact.LastUpdateTime == nil {
		t.Fatalf("status.artifact = %+v; want it set with lastUpdateTime", got.Status.Artifact)
	}
	wantArtifact := pulumiv1.ProgramArtifact{Digest: digest, Revision: "generation/1", Size: int64(len(tarball)),
		Path: "sha256/" + strings.TrimPrefix(digest, "sha256:") + ".tar.gz"}
	if diff := cmp.Diff(wantArtifact, *got.Status.Artifact, cmpopts.IgnoreFields(pulumiv1.ProgramArtifact{}, "LastUpdateTime")); diff != "" {
		t.Errorf("status.artifact (-want +got):\n%s", diff)
	}
	wantConditions := []metav1.Condition{{
		Type: pulumiv1.ConditionReady, Status: metav1.ConditionTrue, Reason: pulumiv1.ReasonArtifactReady,
		Message: "Rendered generation/1 to artifact " + digest, ObservedGeneration: 1,
	}}
	if diff := cmp.Diff(wantConditions, got.Status.Conditions, statustest.Compare); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}

	// The stored artifact is exactly the rendered project, where status.artifact.path says.
	if !store.Has(digest) {
		t.Fatalf("store lacks %s", digest)
	}
	if _, err := os.Stat(filepath.Join(store.Dir(), filepath.FromSlash(got.Status.Artifact.Path))); err != nil {
		t.Errorf("status.artifact.path does not lead to the stored artifact: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "x")
	if err := store.Extract(digest, dir, artifact.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	stored, err := os.ReadFile(filepath.Join(dir, "Pulumi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := project.Render(got)
	if diff := cmp.Diff(string(want), string(stored)); diff != "" {
		t.Errorf("stored Pulumi.yaml (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(string(stored), "name: files\nruntime: yaml\n") {
		t.Errorf("stored Pulumi.yaml does not start with the Program's name and runtime:\n%s", stored)
	}

	s.WaitEvent(got, "Normal", program.EventReasonArtifactReady)
}

func TestReconciler_Reconcile_SpecChangeChangesDigestAndRevision(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	first := newProgram("files", filesSpec(`"${message}"`))
	s.Create(first)
	s.WaitCondition(first, pulumiv1.ConditionReady, metav1.ConditionTrue, "")
	checkObserved(t, first, 1)

	second := first.DeepCopy()
	s.Patch(second, func() { second.Program = filesSpec(`"changed: ${message}"`) })
	s.WaitCondition(second, pulumiv1.ConditionReady, metav1.ConditionTrue, "")
	checkObserved(t, second, 2)

	_, digest := packed(t, second)
	if second.Status.Artifact.Digest != digest {
		t.Errorf("digest = %s; want %s", second.Status.Artifact.Digest, digest)
	}
	if second.Status.Artifact.Digest == first.Status.Artifact.Digest {
		t.Errorf("digest stayed %s after a spec change", first.Status.Artifact.Digest)
	}
	if got := second.Status.Artifact.Revision; got != "generation/2" {
		t.Errorf("revision = %s; want generation/2", got)
	}
	if !second.Status.Artifact.LastUpdateTime.After(first.Status.Artifact.LastUpdateTime.Time) {
		t.Errorf("lastUpdateTime %v did not move past %v with the new digest", second.Status.Artifact.LastUpdateTime, first.Status.Artifact.LastUpdateTime)
	}
	// The old artifact stays: a Stack may still need it to destroy what it deployed.
	for _, d := range []string{first.Status.Artifact.Digest, digest} {
		if !store.Has(d) {
			t.Errorf("store lacks %s", d)
		}
	}
}

// Content addressing: the artifact depends on the Program's name and spec, not on where it
// lives, so equal Programs in different namespaces share one stored file.
func TestReconciler_Reconcile_SameSpecSameDigestAcrossNamespaces(t *testing.T) {
	t.Parallel()
	sa, sb := env.Scenario(t), env.Scenario(t)
	a, b := newProgram("files", filesSpec(`"${message}"`)), newProgram("files", filesSpec(`"${message}"`))
	sa.Create(a)
	sb.Create(b)
	sa.WaitCondition(a, pulumiv1.ConditionReady, metav1.ConditionTrue, "")
	sb.WaitCondition(b, pulumiv1.ConditionReady, metav1.ConditionTrue, "")
	checkObserved(t, a, 1)
	checkObserved(t, b, 1)

	_, want := packed(t, a)
	if a.Status.Artifact.Digest != want || b.Status.Artifact.Digest != want {
		t.Errorf("digests %s (%s) and %s (%s); want both %s", a.Status.Artifact.Digest, sa.Namespace, b.Status.Artifact.Digest, sb.Namespace, want)
	}
}

// get and properties together pass admission (CEL cannot see into untyped maps) but the
// YAML host rejects the program, so the Program stalls until its spec changes.
func TestReconciler_Reconcile_InvalidSpecStallsUntilFixed(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	spec := filesSpec(`"${message}"`)
	r := spec.Resources["greeting"]
	r.Get = &pulumiv1.Getter{ID: "greeting.txt"}
	spec.Resources["greeting"] = r
	got := newProgram("files", spec)
	s.Create(got)

	s.WaitCondition(got, pulumiv1.ConditionStalled, metav1.ConditionTrue, "")
	checkObserved(t, got, 1)
	msg := `failed to render Program: resource "greeting" sets both get and properties, which are mutually exclusive`
	wantConditions := []metav1.Condition{
		{Type: pulumiv1.ConditionReady, Status: metav1.ConditionFalse, Reason: pulumiv1.ReasonNotReadyStalled, Message: msg, ObservedGeneration: 1},
		{Type: pulumiv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: pulumiv1.ReasonSpecInvalid, Message: msg, ObservedGeneration: 1},
	}
	if diff := cmp.Diff(wantConditions, got.Status.Conditions, statustest.Compare); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if got.Status.Artifact != nil {
		t.Errorf("status.artifact = %+v; want none for a Program that never rendered", got.Status.Artifact)
	}
	s.WaitEvent(got, "Warning", program.EventReasonSpecInvalid)

	r.Get = nil
	s.Patch(got, func() { got.Program.Resources["greeting"] = r })
	s.WaitCondition(got, pulumiv1.ConditionReady, metav1.ConditionTrue, "")
	checkObserved(t, got, 2)
	if c := meta.FindStatusCondition(got.Status.Conditions, pulumiv1.ConditionStalled); c != nil {
		t.Errorf("Stalled condition %+v remains after the fix", c)
	}
}

// A store that cannot write is a transient fault: Reconciling with backoff, no
// observedGeneration, and recovery without a spec change once the disk is back. The test
// breaks its store, so it runs a manager of its own rather than break the package's.
func TestReconciler_Reconcile_StoreFailureRetriesUntilItRecovers(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	own := startOwnManager(t, s)
	tmp := filepath.Join(own.Dir(), "tmp")
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A name of its own gives it a digest of its own: the package's store must not get it.
	got := newProgram("isolated", filesSpec(`"${message}"`))
	got.Labels = map[string]string{ownManagerLabel: "true"}
	s.Create(got)

	s.WaitCondition(got, pulumiv1.ConditionReconciling, metav1.ConditionTrue, "")
	if got.Status.ObservedGeneration != 0 || got.Status.Artifact != nil {
		t.Errorf("status = %+v; want no observedGeneration and no artifact while the store fails", got.Status)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, pulumiv1.ConditionReady)
	// Ready=False says NotReadyInProgress (PKO's reason), as for every kind; Reconciling says why.
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != pulumiv1.ReasonNotReadyInProgress {
		t.Errorf("Ready = %+v; want False/%s", ready, pulumiv1.ReasonNotReadyInProgress)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, pulumiv1.ConditionReconciling); c.Reason != pulumiv1.ReasonRetryingAfterFailure || !strings.Contains(c.Message, "failed to store artifact") {
		t.Errorf("Reconciling = %+v; want %s naming the store failure", c, pulumiv1.ReasonRetryingAfterFailure)
	}
	s.WaitEvent(got, "Warning", program.EventReasonStoreFailed)

	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	s.WaitCondition(got, pulumiv1.ConditionReady, metav1.ConditionTrue, "")
	checkObserved(t, got, 1)
	if c := meta.FindStatusCondition(got.Status.Conditions, pulumiv1.ConditionReconciling); c != nil {
		t.Errorf("Reconciling %+v remains after recovery", c)
	}
	if !own.Has(got.Status.Artifact.Digest) {
		t.Errorf("store lacks %s after recovery", got.Status.Artifact.Digest)
	}
	if store.Has(got.Status.Artifact.Digest) {
		t.Errorf("the package's store has %s: its manager reconciled the Program too", got.Status.Artifact.Digest)
	}
}
