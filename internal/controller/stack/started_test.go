package stack

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/kit"
)

// An Update's start is announced once, when the Stack sees it Running, and only by a
// manager that saw it before it ran; a run that ends before it reads Running (a short run
// of the local executor) is announced by its result alone, and so is a resync.
func TestReconciler_FollowStart_AnnouncesARunningUpdateOnce(t *testing.T) {
	t.Parallel()
	const deployed, changed = "k0", "k1"
	type step struct {
		// created: this manager created the Update (createUpdate's expectation); otherwise
		// a reconcile observes it in the phase given.
		created bool
		phase   v1alpha1.UpdatePhase
		uid     types.UID
	}
	started := "Normal UpdateStarted Started up at revision generation/2: desired state changed (Update web-k1-1)"
	tests := []struct {
		name  string
		key   string
		steps []step
		want  []string
	}{
		{name: "CreatedHereAnnouncedOnceRunning", key: changed, steps: []step{
			{created: true, uid: "a"}, {phase: v1alpha1.UpdatePhasePending, uid: "a"},
			{phase: v1alpha1.UpdatePhaseRunning, uid: "a"}, {phase: v1alpha1.UpdatePhaseRunning, uid: "a"}, {phase: v1alpha1.UpdatePhaseSucceeded, uid: "a"},
		}, want: []string{started}},
		{name: "ShortRunIsNotAnnounced", key: changed, steps: []step{
			{created: true, uid: "a"}, {phase: v1alpha1.UpdatePhasePending, uid: "a"}, {phase: v1alpha1.UpdatePhaseSucceeded, uid: "a"},
			// A stale read after its end announces nothing either.
			{phase: v1alpha1.UpdatePhaseRunning, uid: "a"},
		}},
		{name: "SeenPendingHereAnnouncedWithoutTheDecision", key: changed, steps: []step{
			{phase: v1alpha1.UpdatePhasePending, uid: "a"}, {phase: v1alpha1.UpdatePhaseRunning, uid: "a"},
		}, want: []string{"Normal UpdateStarted Started up at revision generation/2 (Update web-k1-1)"}},
		{name: "FirstSeenRunningIsNotAnnounced", key: changed, steps: []step{
			{phase: v1alpha1.UpdatePhaseRunning, uid: "a"}, {phase: v1alpha1.UpdatePhaseSucceeded, uid: "a"},
		}},
		{name: "ResyncIsNotAnnounced", key: deployed, steps: []step{
			{phase: v1alpha1.UpdatePhasePending, uid: "a"}, {phase: v1alpha1.UpdatePhaseRunning, uid: "a"},
		}},
		{name: "AnotherUpdateIsNotTakenForIt", key: changed, steps: []step{
			{created: true, uid: "a"}, {phase: v1alpha1.UpdatePhaseRunning, uid: "b"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := events.NewFakeRecorder(10)
			r := &Reconciler{}
			st := &pulumiv1.Stack{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Status:     pulumiv1.StackStatus{Stackwright: &pulumiv1.StackwrightStatus{LastSuccessfulKey: deployed}},
			}
			for _, step := range tt.steps {
				u := &v1alpha1.Update{
					ObjectMeta: metav1.ObjectMeta{Name: "web-k1-1", Namespace: "default", UID: step.uid},
					Spec:       v1alpha1.UpdateSpec{StackName: "web", Type: v1alpha1.UpdateTypeUp, Revision: "generation/2", DesiredStateKey: tt.key},
					Status:     v1alpha1.UpdateStatus{Phase: step.phase},
				}
				s := &scope{stack: st, events: kit.NewEvents(rec, eventAction)}
				if step.created {
					r.starts.expect(types.NamespacedName{Namespace: "default", Name: "web"}, u.UID, "desired state changed")
					continue
				}
				r.followStart(s, u, false)
				s.events.Flush(nil)
			}
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// The event that ends a run says how long it ran, since a short run has no UpdateStarted.
func TestTook_Update_SaysHowLongItRan(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }
	tests := []struct {
		name       string
		start, end *metav1.Time
		want       string
	}{
		{name: "Seconds", start: at(0), end: at(3400 * time.Millisecond), want: " in 3s"},
		{name: "UnderASecond", start: at(0), end: at(0), want: " in under a second"},
		{name: "NoStart", end: at(0)},
		{name: "EndBeforeStart", start: at(time.Second), end: at(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := &v1alpha1.Update{Status: v1alpha1.UpdateStatus{StartTime: tt.start, EndTime: tt.end}}
			if diff := cmp.Diff(tt.want, took(u, "in")); diff != "" {
				t.Errorf("took (-want +got):\n%s", diff)
			}
		})
	}
}
