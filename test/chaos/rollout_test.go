package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// sharedProgram writes <stack>.txt holding content, after a nap, so that crashes land
// inside engine runs.
func sharedProgram(p *pulumiv1.Program, content string) {
	p.Program.Resources = map[string]pulumiv1.Resource{
		"nap": {Type: "stackwright-testing:index:Sleep", Properties: map[string]apiextensionsv1.JSON{"seconds": {Raw: []byte("1")}}},
		"out": {Type: "stackwright-testing:index:File", Properties: map[string]apiextensionsv1.JSON{
			"path": jsonValue("${pulumi.stack}.txt"), "content": jsonValue(content),
		}},
	}
}

// A manager SIGKILLed again and again while a rollout moves a new revision through three
// rings resumes it where it was: every Stack ends at the new revision, no ring starts
// before the previous one is done (by the Updates' own times), and no Stack applies the
// new revision twice (by the backend's history).
func TestManager_SIGKILL_RolloutResumesInTurn(t *testing.T) {
	p := profileFromEnv(t)
	rng := rand.New(rand.NewPCG(p.seed, 1))
	ctx := t.Context()
	dir := t.TempDir()
	m := newManager(t, dir)
	ns := env.Namespace(t)
	files := filepath.Join(dir, "files")

	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"}}
	sharedProgram(prog, "v1")
	create(ctx, t, prog)
	rings := [][]string{{"r0-a"}, {"r1-a", "r1-b"}, {"r2-a", "r2-b", "r2-c"}}
	var names []string
	for i, ring := range rings {
		for _, name := range ring {
			st := m.stack(ns, name, files)
			st.Spec.ProgramRef.Name = "shared"
			st.Labels["app"], st.Labels["ring"] = "fleet", fmt.Sprint(i)
			create(ctx, t, st)
			names = append(names, name)
		}
	}
	m.start(t)
	waitAllReady(t, m, ns, names, 5*time.Minute, "the start")
	create(ctx, t, &v1alpha1.StackRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: v1alpha1.StackRolloutSpec{
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"app": "fleet"}},
			Waves:       v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1", "2"}}},
			MaxParallel: new(intstr.FromInt32(1)),
			BakeTime:    &metav1.Duration{Duration: time.Second},
		},
	})
	waitRollout(t, m, ns, "fleet", "the rollout takes generation/1 as stable", func(ro *v1alpha1.StackRollout) bool {
		return ro.Status.Phase == v1alpha1.RolloutIdle && ro.Status.Stable != nil && ro.Status.Stable.Revision == "generation/1"
	})

	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(prog), prog); err != nil {
		t.Fatal(err)
	}
	sharedProgram(prog, "v2")
	if err := env.Client.Update(ctx, prog); err != nil {
		t.Fatal(err)
	}
	crashes := 0
	for range max(p.kills/2, 3) {
		time.Sleep(time.Duration(1000+rng.IntN(3000)) * time.Millisecond)
		m.kill(t)
		crashes++
		m.start(t)
	}
	waitRollout(t, m, ns, "fleet", "the rollout of generation/2 completes after the last crash", func(ro *v1alpha1.StackRollout) bool {
		return ro.Status.Phase == v1alpha1.RolloutIdle && ro.Status.Stable != nil && ro.Status.Stable.Revision == "generation/2"
	})
	waitAllReady(t, m, ns, names, 5*time.Minute, "the rollout")
	m.stop(t)

	for _, name := range names {
		if got, err := os.ReadFile(filepath.Join(files, name+".txt")); err != nil || string(got) != "v2" {
			t.Errorf("Stack %s: %s.txt = %q, %v; want v2", name, name, got, err)
		}
	}
	var updates v1alpha1.UpdateList
	if err := env.Client.List(ctx, &updates, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	ringOf := map[string]int{}
	for i, ring := range rings {
		for _, n := range ring {
			ringOf[n] = i
		}
	}
	firstStart := make([]time.Time, len(rings))
	lastEnd := make([]time.Time, len(rings))
	for _, u := range updates.Items {
		if u.Spec.Type != v1alpha1.UpdateTypeUp || u.Spec.Revision != "generation/2" {
			continue
		}
		r := ringOf[u.Spec.StackName]
		if c := u.CreationTimestamp.Time; firstStart[r].IsZero() || c.Before(firstStart[r]) {
			firstStart[r] = c
		}
		if u.Status.Phase == v1alpha1.UpdatePhaseSucceeded && u.Status.EndTime != nil && u.Status.EndTime.After(lastEnd[r]) {
			lastEnd[r] = u.Status.EndTime.Time
		}
	}
	for r := 1; r < len(rings); r++ {
		// Update times are whole seconds.
		if firstStart[r].Before(lastEnd[r-1].Truncate(time.Second)) {
			t.Errorf("ring %d started at %s, before ring %d was done at %s", r, firstStart[r], r-1, lastEnd[r-1])
		}
	}
	runs := succeededUpdates(t, m.dataDir)
	for _, name := range names {
		// One up of generation/1, one of generation/2.
		if runs[name] != 2 {
			t.Errorf("Stack %s: %d succeeded updates in the backend's history; want 2 (one per revision)", name, runs[name])
		}
	}
	if locks := lockFiles(t, m.dataDir); len(locks) > 0 {
		t.Errorf("locks left in the backend: %v", locks)
	}
	t.Logf("crashes injected during the rollout: %d; ring starts %v; ring ends %v", crashes, firstStart, lastEnd)
}

// waitRollout waits until the rollout satisfies ok, for at most 5 minutes.
func waitRollout(t *testing.T, m *manager, ns, name, why string, ok func(*v1alpha1.StackRollout) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ro := &v1alpha1.StackRollout{}
		err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, ro)
		if err == nil && ok(ro) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5m; status %+v (%v)", why, ro.Status, err)
		}
		if m.dead() {
			t.Fatalf("the manager exited:\n%s", tail(m.logPath, 4096))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
