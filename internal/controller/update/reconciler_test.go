package update_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/executor"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// newUpdate creates a Stack and an Update of it, owned by it when owned is set, with the
// given status.
func newUpdate(t *testing.T, s *kubetest.Scenario, name string, owned bool, status v1alpha1.UpdateStatus) *v1alpha1.Update {
	t.Helper()
	st := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "stack-" + name},
		Spec:       pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "p"}},
	}
	s.Create(st)
	u := &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace},
		Spec:       v1alpha1.UpdateSpec{StackName: st.Name, Type: v1alpha1.UpdateTypeUp, DesiredStateKey: "k", Attempt: 1},
	}
	if owned {
		if err := controllerutil.SetControllerReference(st, u, env.Scheme); err != nil {
			t.Fatal(err)
		}
		// As the Stack controller does: the intent is recorded before the Update exists.
		recordCurrent(t, st, name)
	}
	s.Create(u)
	if status.Phase != "" {
		u.Status = status
		if err := env.Client.Status().Update(t.Context(), u); err != nil {
			t.Fatalf("failed to set status of Update %s: %v", name, err)
		}
	}
	return u
}

// recordCurrent records name as st's update in flight.
func recordCurrent(t *testing.T, st *pulumiv1.Stack, name string) {
	t.Helper()
	st.Status.CurrentUpdate = &pulumiv1.CurrentStackUpdate{Name: name}
	if err := env.Client.Status().Update(t.Context(), st); err != nil {
		t.Fatalf("failed to record Update %s on Stack %s: %v", name, st.Name, err)
	}
}

func TestReconciler_Reconcile_SubmitsPendingUpdatesOfItsStack(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	u := newUpdate(t, s, "pending", true, v1alpha1.UpdateStatus{})
	s.Eventually(func(g Gomega) {
		g.Expect(exec.wasSubmitted(s.Namespace, u.Name)).To(BeTrue(), "Update %s was not submitted", u.Name)
	})
}

// A submitted Update that waits says where it stands in the executor's queue, and keeps
// saying it while it waits.
func TestReconciler_Reconcile_WaitingUpdateShowsItsQueuePosition(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	key := s.Namespace + "/waiting"
	exec.setQueued(key, &executor.Position{Ahead: 3, TenantAtLimit: true, Running: 4, Slots: 4, EstimatedWait: 3 * time.Minute})
	t.Cleanup(func() { exec.setQueued(key, nil) })
	u := newUpdate(t, s, "waiting", true, v1alpha1.UpdateStatus{})
	want := &v1alpha1.UpdateQueue{Ahead: 3, Reason: v1alpha1.QueueReasonTenantAtLimit, RunningUpdates: 4, Slots: 4, EstimatedWaitSeconds: ptr(int64(180))}
	s.Eventually(func(g Gomega) {
		g.Expect(s.Get(u)).To(Succeed())
		g.Expect(u.Status.Queue).To(Equal(want))
	})
}

// Only the Stack controller decides what runs: an Update someone created by hand, not
// owned by its Stack, could destroy a stack they cannot edit.
func TestReconciler_Reconcile_IgnoresUpdatesNotCreatedByTheirStack(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	forged := newUpdate(t, s, "forged", false, v1alpha1.UpdateStatus{})
	s.Eventually(func(g Gomega) {
		var ignored bool
		for _, line := range strings.Split(kubetest.Logs.String(), "\n") {
			ignored = ignored || strings.Contains(line, "Ignoring Update not created by its Stack") && strings.Contains(line, s.Namespace)
		}
		g.Expect(ignored).To(BeTrue(), "the controller has not looked at Update %s yet", forged.Name)
	})
	if exec.wasSubmitted(s.Namespace, forged.Name) {
		t.Errorf("Update %s, not owned by its Stack, was submitted", forged.Name)
	}
}

// An Update that names its Stack as controller is still not the Stack's decision unless
// the owner reference carries the Stack's UID and the Stack recorded that Update as its
// update in flight: anyone who may create Updates can write a name, and read a UID.
func TestReconciler_Reconcile_IgnoresForgedOwnership(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		forge func(st *pulumiv1.Stack, u *v1alpha1.Update)
	}{
		{"the Stack's name with another UID", func(st *pulumiv1.Stack, u *v1alpha1.Update) {
			u.OwnerReferences = []metav1.OwnerReference{{APIVersion: pulumiv1.GroupVersion.String(), Kind: "Stack", Name: st.Name, UID: "00000000-0000-0000-0000-000000000000", Controller: ptr(true)}}
			recordCurrent(t, st, u.Name)
		}},
		{"the Stack's UID, but the Stack runs another Update", func(st *pulumiv1.Stack, u *v1alpha1.Update) {
			if err := controllerutil.SetControllerReference(st, u, env.Scheme); err != nil {
				t.Fatal(err)
			}
			recordCurrent(t, st, "the-real-one")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := env.Scenario(t)
			st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "victim"}, Spec: pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "p"}}}
			s.Create(st)
			u := &v1alpha1.Update{
				ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: s.Namespace},
				Spec:       v1alpha1.UpdateSpec{StackName: st.Name, Type: v1alpha1.UpdateTypeDestroy, DesiredStateKey: "k", Attempt: 1},
			}
			tc.forge(st, u)
			s.Create(u)
			s.Eventually(func(g Gomega) {
				var ignored bool
				for _, line := range strings.Split(kubetest.Logs.String(), "\n") {
					ignored = ignored || strings.Contains(line, "Ignoring Update not created by its Stack") && strings.Contains(line, s.Namespace)
				}
				g.Expect(ignored).To(BeTrue(), "the controller has not looked at Update %s yet", u.Name)
			})
			if exec.wasSubmitted(s.Namespace, u.Name) {
				t.Errorf("forged Update %s was submitted", u.Name)
			}
		})
	}
}

// An Update the controller sees before its cache has the Stack's record of it is run
// once the record arrives.
func TestReconciler_Reconcile_SubmitsOnceTheStackRecordsIt(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Spec: pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "p"}}}
	s.Create(st)
	u := &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: "late-1", Namespace: s.Namespace},
		Spec:       v1alpha1.UpdateSpec{StackName: st.Name, Type: v1alpha1.UpdateTypeUp, DesiredStateKey: "k", Attempt: 1},
	}
	if err := controllerutil.SetControllerReference(st, u, env.Scheme); err != nil {
		t.Fatal(err)
	}
	s.Create(u)
	time.Sleep(time.Second)
	if exec.wasSubmitted(s.Namespace, u.Name) {
		t.Fatalf("Update %s was submitted before its Stack recorded it", u.Name)
	}
	recordCurrent(t, st, u.Name)
	s.Eventually(func(g Gomega) {
		g.Expect(exec.wasSubmitted(s.Namespace, u.Name)).To(BeTrue(), "Update %s was not submitted", u.Name)
	})
}

// A Running Update whose runner no executor owns (the manager restarted mid-run) is
// failed, so that its Stack retries instead of waiting forever.
// A Running Update whose runner is gone, or never started, fails once, here, with result
// Failed (counted as a failed run) and a reason saying which; the Stack retries either.
func TestReconciler_Reconcile_FailsRunningUpdateOfAGoneRunner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, runner, notStarted, reason, message string
		lost                                      executor.Verdict
	}{
		{
			name: "lost", runner: "job/ns/lost", reason: v1alpha1.ReasonRunnerLost,
			message: "runner job/ns/lost lost: its runner Job was deleted before it reported a result; it will be retried",
		},
		{
			name: "oom killed", runner: "job/ns/oom", reason: v1alpha1.ReasonOOMKilled,
			lost:    executor.Verdict{Lost: "its runner ran out of memory (limit of 256Mi) and was killed", LostReason: v1alpha1.ReasonOOMKilled},
			message: "runner job/ns/oom lost: its runner ran out of memory (limit of 256Mi) and was killed; it will be retried",
		},
		{
			name: "not started", runner: "job/ns/pending", notStarted: "its runner Pod was not scheduled within 5m0s: no node",
			reason:  v1alpha1.ReasonTransientFailure,
			message: "runner job/ns/pending did not start: its runner Pod was not scheduled within 5m0s: no node; it will be retried",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := env.Scenario(t)
			exec.mu.Lock()
			if tc.notStarted != "" {
				exec.notStarted[tc.runner] = tc.notStarted
			}
			if tc.lost.Lost != "" {
				exec.lost[tc.runner] = tc.lost
			}
			exec.mu.Unlock()
			u := newUpdate(t, s, "gone", true, v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseRunning, Runner: tc.runner, StartTime: &metav1.Time{Time: time.Now()}})
			s.WaitCondition(u, v1alpha1.ConditionComplete, metav1.ConditionFalse, tc.reason)
			want := v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseFailed, Runner: tc.runner, Result: v1alpha1.UpdateResultFailed, Message: tc.message}
			if diff := cmp.Diff(want, u.Status, cmpopts.IgnoreFields(v1alpha1.UpdateStatus{}, "EndTime", "StartTime", "Conditions")); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if u.Status.EndTime == nil {
				t.Error("status.endTime is not set")
			}
			// Counted once the status write succeeded, so moments after it is visible: as a
			// failed run, by its reason, and (a runner gone) as a lost runner.
			wantLost := 0.0
			if v1alpha1.RunnerLostReason(tc.reason) {
				wantLost = 1
			}
			NewWithT(t).Eventually(func() []float64 {
				return []float64{
					counted(t, "stackwright_updates_total", s.Namespace, "result", "failed"),
					counted(t, "stackwright_update_failures_total", s.Namespace, "reason", tc.reason),
					counted(t, "stackwright_runners_lost_total", s.Namespace, "reason", tc.reason),
				}
			}).WithTimeout(10*time.Second).Should(Equal([]float64{1, 1, wantLost}),
				"stackwright_updates_total{result=\"failed\"}, stackwright_update_failures_total{reason} and stackwright_runners_lost_total{reason} in the namespace")
		})
	}
}

// counted sums the series of the counter name in namespace whose label is value, from the
// manager's registry.
func counted(t *testing.T, name, namespace, label, value string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == namespace && labels[label] == value {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// A Running Update whose runner is alive is left to it.
func TestReconciler_Reconcile_LeavesRunningUpdateOfALiveRunner(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	exec.mu.Lock()
	exec.alive["host/2/alive"] = true
	exec.mu.Unlock()
	alive := newUpdate(t, s, "alive", true, v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseRunning, Runner: "host/2/alive"})
	// An orphan created after it is handled after it: once the orphan is failed, the live
	// one has been looked at too.
	orphan := newUpdate(t, s, "orphan", true, v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseRunning, Runner: "host/2/gone"})
	s.WaitCondition(orphan, v1alpha1.ConditionComplete, metav1.ConditionFalse, v1alpha1.ReasonRunnerLost)
	if err := s.Get(alive); err != nil {
		t.Fatal(err)
	}
	if alive.Status.Phase != v1alpha1.UpdatePhaseRunning {
		t.Errorf("Update of a live runner: phase %s, want Running", alive.Status.Phase)
	}
}

func ptr[T any](v T) *T { return &v }
