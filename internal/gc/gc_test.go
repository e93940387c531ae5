package gc_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/gc"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

// Every artifact is a day old; the objects in the API decide which are still needed.
func TestArtifacts_Collect_KeepsWhatObjectsName(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	store, err := artifact.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]string{}
	for _, name := range []string{"deployed", "program", "pending", "finished", "orphan"} {
		d, err := store.Put(bytes.NewReader([]byte(name)), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		day := time.Now().Add(-24 * time.Hour)
		if err := os.Chtimes(filepath.Join(store.Dir(), artifact.RelPath(d)), day, day); err != nil {
			t.Fatal(err)
		}
		digests[name] = d
	}
	create := func(obj client.Object, status func()) {
		t.Helper()
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		status()
		if err := env.Client.Status().Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "web"}}}
	create(st, func() {
		st.Status.Stackwright = &pulumiv1.StackwrightStatus{LastArtifact: &pulumiv1.ArtifactRef{Digest: digests["deployed"]}}
	})
	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	create(prog, func() { prog.Status.Artifact = &pulumiv1.ProgramArtifact{Digest: digests["program"]} })
	for name, phase := range map[string]v1alpha1.UpdatePhase{"pending": v1alpha1.UpdatePhaseRunning, "finished": v1alpha1.UpdatePhaseSucceeded} {
		u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-" + name},
			Spec: v1alpha1.UpdateSpec{StackName: "web", Type: v1alpha1.UpdateTypeUp, ArtifactDigest: digests[name], Attempt: 1}}
		create(u, func() { u.Status.Phase = phase })
	}

	a := &gc.Artifacts{Client: env.Client, Store: store, Interval: time.Hour, Retention: time.Hour}
	if err := a.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for name, d := range digests {
		got[name] = store.Has(d)
	}
	want := map[string]bool{"deployed": true, "program": true, "pending": true, "finished": false, "orphan": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("artifacts kept (-want +got):\n%s", diff)
	}
}
