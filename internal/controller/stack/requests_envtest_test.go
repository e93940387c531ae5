package stack_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/autoupdate"
	"github.com/stackwright/stackwright/internal/controller/stack"
)

// request creates a PKO hand-made Update of the given type on Stack workspace.
func (s *scenario) request(name, workspace string, typ autov1alpha1.UpdateType, mutate func(*autov1alpha1.UpdateSpec)) *autov1alpha1.Update {
	s.t.Helper()
	req := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: workspace, Type: typ},
	}
	if mutate != nil {
		mutate(&req.Spec)
	}
	s.create(req)
	return req
}

// waitRequest waits until the request is complete and returns it.
func (s *scenario) waitRequest(name string) *autov1alpha1.Update {
	s.t.Helper()
	req := &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: name}}
	s.kube.WaitCondition(req, autov1alpha1.ConditionComplete, metav1.ConditionTrue, "")
	return req
}

// conditions are a request's three conditions as status/reason pairs.
func conditions(req *autov1alpha1.Update) map[string]string {
	out := map[string]string{}
	for _, typ := range []string{autov1alpha1.ConditionProgressing, autov1alpha1.ConditionComplete, autov1alpha1.ConditionFailed} {
		if c := apimeta.FindStatusCondition(req.Status.Conditions, typ); c != nil {
			out[typ] = string(c.Status) + "/" + c.Reason
		}
	}
	return out
}

// A PKO runbook's hand-made Updates run on the Stack they name, one after another: a
// refresh preview reports a hand edit without adopting it, a preview shows what an up
// would change, a refresh adopts the edit, an up puts the declared content back, and a
// destroy removes the resources. Each completes as PKO's do (Complete, Failed with the
// engine's result), names the Update that ran it, and leaves the Stack's own record (its
// last update, its Ready condition) alone.
func TestStackReconciler_Requests_RunAsTheStacksUpdates(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("oneoff", map[string]pulumiv1.Resource{"f": fileResource("oneoff.txt", "declared")}, nil))
	s.create(s.stack("oneoff", "oneoff"))
	deployed := s.waitReady("oneoff").Status.LastUpdate.DeepCopy()
	s.g.Expect(os.WriteFile(filepath.Join(s.files, "oneoff.txt"), []byte("edited by hand"), 0o600)).To(Succeed())

	succeeded := map[string]string{
		autov1alpha1.ConditionProgressing: "False/" + autoupdate.ReasonComplete,
		autov1alpha1.ConditionComplete:    "True/" + autoupdate.ReasonComplete,
		autov1alpha1.ConditionFailed:      "False/succeeded",
	}
	for _, tc := range []struct {
		name    string
		typ     autov1alpha1.UpdateType
		mutate  func(*autov1alpha1.UpdateSpec)
		runAs   v1alpha1.UpdateType
		message string
		content string
	}{
		{"check", autov1alpha1.RefreshType, func(s *autov1alpha1.UpdateSpec) { s.PreviewOnly = ptr.To(true) }, v1alpha1.UpdateTypeDrift, "drift detected: 1 to update", "edited by hand"},
		{"look", autov1alpha1.PreviewType, func(s *autov1alpha1.UpdateSpec) { s.StackName = "oneoff"; s.Parallel = ptr.To[int32](1) }, v1alpha1.UpdateTypePreview, "preview succeeded", "edited by hand"},
		{"adopt", autov1alpha1.RefreshType, nil, v1alpha1.UpdateTypeRefresh, "refresh succeeded: 1 updated", "edited by hand"},
		{"restore", autov1alpha1.UpType, func(s *autov1alpha1.UpdateSpec) { s.Message = ptr.To("put it back") }, v1alpha1.UpdateTypeUp, "up succeeded: 1 updated", "declared"},
	} {
		s.request(tc.name, "oneoff", tc.typ, tc.mutate)
		req := s.waitRequest(tc.name)
		if diff := cmp.Diff(succeeded, conditions(req)); diff != "" {
			t.Errorf("%s: conditions (-want +got):\n%s\nmessage: %s", tc.name, diff, req.Status.Message)
		}
		s.g.Expect(req.Status.Message).To(ContainSubstring(tc.message), tc.name)
		s.g.Expect(req.Status.StartTime.IsZero() || req.Status.EndTime.Before(&req.Status.StartTime)).To(BeFalse(), "%s: start %v, end %v", tc.name, req.Status.StartTime, req.Status.EndTime)
		u := s.update(req.Status.Update)
		s.g.Expect(u.Spec.Type).To(Equal(tc.runAs), tc.name)
		s.g.Expect(u.Labels).To(HaveKeyWithValue(v1alpha1.RequestLabel, tc.name))
		s.g.Expect(u.Spec.DesiredStateKey).To(BeEmpty(), "%s: a one-off records no desired state", tc.name)
		if tc.typ == autov1alpha1.UpType {
			s.g.Expect(u.Spec.Options.Message).To(Equal("put it back"))
		}
		content, err := s.readFile("oneoff.txt")
		s.g.Expect(err).NotTo(HaveOccurred())
		s.g.Expect(content).To(Equal(tc.content), tc.name)
	}

	s.request("teardown", "oneoff", autov1alpha1.DestroyType, func(s *autov1alpha1.UpdateSpec) { s.TtlAfterCompleted = &metav1.Duration{Duration: time.Second} })
	s.eventually(func(g Gomega) {
		err := env.Client.Get(s.ctx(), client.ObjectKey{Namespace: s.ns, Name: "teardown"}, &autov1alpha1.Update{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "a completed request with ttlAfterCompleted is deleted")
	})
	s.requireDestroyed("oneoff.txt")

	st := s.waitReady("oneoff")
	s.g.Expect(st.Status.CurrentUpdate).To(BeNil())
	if diff := cmp.Diff(deployed, st.Status.LastUpdate); diff != "" {
		t.Errorf("the Stack's last update changed (-before +after):\n%s", diff)
	}
	s.kube.WaitEvent(st, "Normal", stack.EventRequestSucceeded)
}

// A request that cannot run completes at once as failed, with a reason that says why; one
// for a suspended Stack waits, saying so, and runs once the Stack is resumed; one whose
// operation fails completes with Failed=True and the engine's reason.
func TestStackReconciler_Requests_RefusedWaitingOrFailed(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("waiter", map[string]pulumiv1.Resource{"f": fileResource("waiter.txt", "declared")}, nil))
	s.create(s.stack("waiter", "waiter"))
	st := s.waitReady("waiter")
	s.patch(st, func() { st.Spec.Stackwright = &pulumiv1.StackwrightSpec{Suspend: true} })
	s.waitCondition("waiter", pulumiv1.ConditionSuspended, metav1.ConditionTrue, pulumiv1.ReasonSuspended)
	s.g.Expect(os.WriteFile(filepath.Join(s.files, "waiter.txt"), []byte("edited by hand"), 0o600)).To(Succeed())

	for _, tc := range []struct {
		name, workspace string
		typ             autov1alpha1.UpdateType
		stackName       string
		reason          string
	}{
		{"rollback", "waiter", "rollback", "", autoupdate.ReasonUnsupportedType},
		{"nowhere", "missing", autov1alpha1.RefreshType, "", autoupdate.ReasonStackNotFound},
		{"unnamed", "", autov1alpha1.RefreshType, "", autoupdate.ReasonStackNotFound},
		{"elsewhere", "waiter", autov1alpha1.DestroyType, "prod", autoupdate.ReasonStackNameMismatch},
	} {
		s.request(tc.name, tc.workspace, tc.typ, func(s *autov1alpha1.UpdateSpec) { s.StackName = tc.stackName })
		req := s.waitRequest(tc.name)
		want := map[string]string{
			autov1alpha1.ConditionProgressing: "False/" + autoupdate.ReasonRefused,
			autov1alpha1.ConditionComplete:    "True/" + autoupdate.ReasonRefused,
			autov1alpha1.ConditionFailed:      "True/" + tc.reason,
		}
		if diff := cmp.Diff(want, conditions(req)); diff != "" {
			t.Errorf("%s: conditions (-want +got):\n%s", tc.name, diff)
		}
		s.g.Expect(req.Status.Message).NotTo(BeEmpty(), tc.name)
		s.g.Expect(req.Status.Update).To(BeEmpty(), "%s: nothing ran", tc.name)
		s.kube.WaitEvent(req, "Warning", autoupdate.EventRefused)
	}

	s.request("strict", "waiter", autov1alpha1.PreviewType, func(s *autov1alpha1.UpdateSpec) { s.ExpectNoChanges, s.Refresh = ptr.To(true), ptr.To(true) })
	queued := &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: "strict"}}
	s.kube.WaitCondition(queued, autov1alpha1.ConditionProgressing, metav1.ConditionTrue, autoupdate.ReasonQueued)
	s.g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(s.ctx(), client.ObjectKeyFromObject(queued), queued)).To(Succeed())
		g.Expect(autoupdate.Completed(queued)).To(BeFalse())
		g.Expect(queued.Status.Update).To(BeEmpty())
	}).WithTimeout(2*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "a suspended Stack ran a request")

	st = s.waitCondition("waiter", pulumiv1.ConditionSuspended, metav1.ConditionTrue, pulumiv1.ReasonSuspended)
	s.patch(st, func() { st.Spec.Stackwright = nil })
	req := s.waitRequest("strict")
	want := map[string]string{
		autov1alpha1.ConditionProgressing: "False/" + autoupdate.ReasonComplete,
		autov1alpha1.ConditionComplete:    "True/" + autoupdate.ReasonComplete,
		autov1alpha1.ConditionFailed:      "True/failed",
	}
	if diff := cmp.Diff(want, conditions(req)); diff != "" {
		t.Errorf("conditions of a failed preview (-want +got):\n%s", diff)
	}
	s.g.Expect(req.Status.Message).To(ContainSubstring("no changes were expected"))
	s.kube.WaitEvent(s.waitReady("waiter"), "Warning", stack.EventRequestFailed)
}
