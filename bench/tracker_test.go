package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The first sighting of an Update starts its record; later ones fill it in without
// moving when it was first seen.
func TestTracker_OnUpdate_FirstSightingStartsTheRecord(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 := t0.Add(time.Second)
	tr := &tracker{updates: map[string]*updateSeen{}}
	u := &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "u"},
		Spec:       v1alpha1.UpdateSpec{StackName: "s", Revision: "r1", Type: v1alpha1.UpdateTypeUp},
	}
	tr.onUpdate(u, t0)
	u.Status.Phase = v1alpha1.UpdatePhaseRunning
	tr.onUpdate(u, t1)
	want := updateSeen{stack: "ns/s", revision: "r1", typ: v1alpha1.UpdateTypeUp, seen: t0, run: t1, phase: v1alpha1.UpdatePhaseRunning}
	if diff := cmp.Diff(want, *tr.updates["ns/u"], cmp.AllowUnexported(updateSeen{})); diff != "" {
		t.Errorf("updateSeen (-want +got):\n%s", diff)
	}
}

// A milestone keeps the time it was first reached, run by run.
func TestMilestones_Mark_KeepsTheFirstTime(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := Milestones{}
	m.Mark("a", "ready", t0)
	m.Mark("a", "ready", t0.Add(time.Second))
	m.Mark("a", "done", t0.Add(2*time.Second))
	m.Mark("b", "ready", t0.Add(3*time.Second))
	want := Milestones{
		"a": {"ready": t0, "done": t0.Add(2 * time.Second)},
		"b": {"ready": t0.Add(3 * time.Second)},
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("milestones (-want +got):\n%s", diff)
	}
}
