package program

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	programsource "github.com/stackwright/stackwright/internal/source/program"
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

func createProgram(t *testing.T, ns, name string, spec pulumiv1.ProgramSpec) client.ObjectKey {
	t.Helper()
	p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Program: spec}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatalf("failed to create Program: %v", err)
	}
	return client.ObjectKeyFromObject(p)
}

// packed computes, without the controller, the tarball and digest a Program must get.
func packed(t *testing.T, p *pulumiv1.Program) ([]byte, string) {
	t.Helper()
	files, err := programsource.Pack(p)
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

func readyAt(generation int64) func(p *pulumiv1.Program) bool {
	return func(p *pulumiv1.Program) bool {
		return p.Status.ObservedGeneration == generation &&
			meta.IsStatusConditionTrue(p.Status.Conditions, pulumiv1.ConditionReady)
	}
}

var ignoreTransitionTime = cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")

// waitForEvent waits for an event with reason about the Program.
func waitForEvent(t *testing.T, key client.ObjectKey, eventType, reason string) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		list := &eventsv1.EventList{}
		g.Expect(env.Client.List(context.Background(), list, client.InNamespace(key.Namespace))).To(gomega.Succeed())
		found := false
		for _, e := range list.Items {
			found = found || (e.Regarding.Name == key.Name && e.Regarding.Kind == "Program" && e.Type == eventType && e.Reason == reason)
		}
		g.Expect(found).To(gomega.BeTrue(), "no %s event %s for %s", eventType, reason, key)
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())
}

func TestReconciler_Reconcile_RendersProgramIntoStore(t *testing.T) {
	ns := env.Namespace(t)
	store := startManager(t, ns)
	key := createProgram(t, ns, "files", filesSpec(`"${message}"`))

	got := waitFor(t, key, "Ready", readyAt(1))

	tarball, digest := packed(t, got)
	if got.Status.Artifact == nil || got.Status.Artifact.LastUpdateTime == nil {
		t.Fatalf("status.artifact = %+v; want it set with lastUpdateTime", got.Status.Artifact)
	}
	wantArtifact := pulumiv1.ProgramArtifact{Digest: digest, Revision: "generation/1", Size: int64(len(tarball))}
	if diff := cmp.Diff(wantArtifact, *got.Status.Artifact, cmpopts.IgnoreFields(pulumiv1.ProgramArtifact{}, "LastUpdateTime")); diff != "" {
		t.Errorf("status.artifact (-want +got):\n%s", diff)
	}
	wantConditions := []metav1.Condition{{
		Type: pulumiv1.ConditionReady, Status: metav1.ConditionTrue, Reason: pulumiv1.ReasonArtifactReady,
		Message: "Rendered generation/1 to artifact " + digest, ObservedGeneration: 1,
	}}
	if diff := cmp.Diff(wantConditions, got.Status.Conditions, ignoreTransitionTime); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}

	// The stored artifact is exactly the rendered project.
	if !store.Has(digest) {
		t.Fatalf("store lacks %s", digest)
	}
	dir := filepath.Join(t.TempDir(), "x")
	if err := store.Extract(digest, dir, artifact.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	project, err := os.ReadFile(filepath.Join(dir, "Pulumi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := programsource.Render(got)
	if diff := cmp.Diff(string(want), string(project)); diff != "" {
		t.Errorf("stored Pulumi.yaml (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(string(project), "name: files\nruntime: yaml\n") {
		t.Errorf("stored Pulumi.yaml does not start with the Program's name and runtime:\n%s", project)
	}

	waitForEvent(t, key, "Normal", EventReasonArtifactReady)
}

func TestReconciler_Reconcile_SpecChangeChangesDigestAndRevision(t *testing.T) {
	ns := env.Namespace(t)
	store := startManager(t, ns)
	key := createProgram(t, ns, "files", filesSpec(`"${message}"`))
	first := waitFor(t, key, "Ready", readyAt(1))

	// lastUpdateTime has one-second resolution.
	time.Sleep(1100 * time.Millisecond)
	first.Program = filesSpec(`"changed: ${message}"`)
	if err := env.Client.Update(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	second := waitFor(t, key, "Ready for generation 2", readyAt(2))

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
	nsA, nsB := env.Namespace(t), env.Namespace(t)
	startManager(t, nsA, nsB)
	a := waitFor(t, createProgram(t, nsA, "files", filesSpec(`"${message}"`)), "Ready", readyAt(1))
	b := waitFor(t, createProgram(t, nsB, "files", filesSpec(`"${message}"`)), "Ready", readyAt(1))

	_, want := packed(t, a)
	if a.Status.Artifact.Digest != want || b.Status.Artifact.Digest != want {
		t.Errorf("digests %s (%s) and %s (%s); want both %s", a.Status.Artifact.Digest, nsA, b.Status.Artifact.Digest, nsB, want)
	}
}

// get and properties together pass admission (CEL cannot see into untyped maps) but the
// YAML host rejects the program, so the Program stalls until its spec changes.
func TestReconciler_Reconcile_InvalidSpecStallsUntilFixed(t *testing.T) {
	ns := env.Namespace(t)
	startManager(t, ns)
	spec := filesSpec(`"${message}"`)
	r := spec.Resources["greeting"]
	r.Get = &pulumiv1.Getter{ID: "greeting.txt"}
	spec.Resources["greeting"] = r
	key := createProgram(t, ns, "files", spec)

	got := waitFor(t, key, "Stalled", func(p *pulumiv1.Program) bool {
		return p.Status.ObservedGeneration == 1 && meta.IsStatusConditionTrue(p.Status.Conditions, pulumiv1.ConditionStalled)
	})
	msg := `failed to render Program: resource "greeting" sets both get and properties, which are mutually exclusive`
	wantConditions := []metav1.Condition{
		{Type: pulumiv1.ConditionReady, Status: metav1.ConditionFalse, Reason: pulumiv1.ReasonInvalidSpec, Message: msg, ObservedGeneration: 1},
		{Type: pulumiv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: pulumiv1.ReasonInvalidSpec, Message: msg, ObservedGeneration: 1},
	}
	if diff := cmp.Diff(wantConditions, got.Status.Conditions, ignoreTransitionTime); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if got.Status.Artifact != nil {
		t.Errorf("status.artifact = %+v; want none for a Program that never rendered", got.Status.Artifact)
	}
	waitForEvent(t, key, "Warning", EventReasonInvalidSpec)

	r.Get = nil
	got.Program.Resources["greeting"] = r
	if err := env.Client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	fixed := waitFor(t, key, "Ready after the fix", readyAt(2))
	if c := meta.FindStatusCondition(fixed.Status.Conditions, pulumiv1.ConditionStalled); c != nil {
		t.Errorf("Stalled condition %+v remains after the fix", c)
	}
}

// A store that cannot write is a transient fault: Reconciling with backoff, no
// observedGeneration, and recovery without a spec change once the disk is back.
func TestReconciler_Reconcile_StoreFailureRetriesUntilItRecovers(t *testing.T) {
	ns := env.Namespace(t)
	store := startManager(t, ns)
	tmp := filepath.Join(store.Dir(), "tmp")
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	key := createProgram(t, ns, "files", filesSpec(`"${message}"`))

	got := waitFor(t, key, "Reconciling", func(p *pulumiv1.Program) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, pulumiv1.ConditionReconciling)
	})
	if got.Status.ObservedGeneration != 0 || got.Status.Artifact != nil {
		t.Errorf("status = %+v; want no observedGeneration and no artifact while the store fails", got.Status)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, pulumiv1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != pulumiv1.ReasonProgressing {
		t.Errorf("Ready = %+v; want False/%s", ready, pulumiv1.ReasonProgressing)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, pulumiv1.ConditionReconciling); c.Reason != pulumiv1.ReasonRetryingAfterFailure || !strings.Contains(c.Message, "failed to store artifact") {
		t.Errorf("Reconciling = %+v; want %s naming the store failure", c, pulumiv1.ReasonRetryingAfterFailure)
	}
	waitForEvent(t, key, "Warning", EventReasonStoreFailed)

	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	recovered := waitFor(t, key, "Ready after the store recovers", readyAt(1))
	if c := meta.FindStatusCondition(recovered.Status.Conditions, pulumiv1.ConditionReconciling); c != nil {
		t.Errorf("Reconciling %+v remains after recovery", c)
	}
	if !store.Has(recovered.Status.Artifact.Digest) {
		t.Errorf("store lacks %s after recovery", recovered.Status.Artifact.Digest)
	}
}
