package stack

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/source"
)

func TestReconciler_VoidApproval_SaysWhy(t *testing.T) {
	t.Parallel()
	awaiting := func() *pulumiv1.ApprovalStatus {
		return &pulumiv1.ApprovalStatus{Preview: "web-k1-preview-1", State: pulumiv1.ApprovalAwaiting, DesiredStateKey: "k1", Attempt: 1, Revision: "r1", PolicyKey: "p1"}
	}
	approved := func() *pulumiv1.ApprovalStatus {
		a := awaiting()
		a.State = pulumiv1.ApprovalApproved
		return a
	}
	tests := []struct {
		name      string
		approval  *pulumiv1.ApprovalStatus
		sw        pulumiv1.StackwrightStatus
		last      *pulumiv1.StackUpdateState
		key, rev  string
		policyKey string
		want      string
	}{
		{name: "NothingToVoid", key: "k2", rev: "r2", policyKey: "p1"},
		{name: "PreviewInFlightIsNotAnApproval", approval: &pulumiv1.ApprovalStatus{Preview: "x", State: pulumiv1.ApprovalPreviewing, DesiredStateKey: "k1"}, key: "k2", rev: "r2"},
		{name: "SourceMoved", approval: awaiting(), key: "k2", rev: "r2", policyKey: "p1",
			want: "the approval of preview Update web-k1-preview-1 is void: the source moved from revision r1 to r2"},
		{name: "SpecOrConfigChanged", approval: awaiting(), key: "k2", rev: "r1", policyKey: "p1",
			want: "the approval of preview Update web-k1-preview-1 is void: the spec, its config or a referenced Secret or ConfigMap changed"},
		{name: "PoliciesChanged", approval: awaiting(), key: "k1", rev: "r1", policyKey: "p2",
			want: "the approval of preview Update web-k1-preview-1 is void: the policies that select the Stack changed"},
		{name: "ApprovedButNotRunYet", approval: approved(), key: "k2", rev: "r2", policyKey: "p1",
			want: "the approval of preview Update web-k1-preview-1 is void: the source moved from revision r1 to r2"},
		{name: "ApprovedUpSucceeded", approval: approved(), sw: pulumiv1.StackwrightStatus{LastAttemptedKey: "k1", Attempt: 1},
			last: &pulumiv1.StackUpdateState{State: pulumiv1.UpdateStateSucceeded}, key: "k2", rev: "r2", policyKey: "p2"},
		{name: "ApprovedUpFailed", approval: approved(), sw: pulumiv1.StackwrightStatus{LastAttemptedKey: "k1", Attempt: 1},
			last: &pulumiv1.StackUpdateState{State: pulumiv1.UpdateStateFailed, Message: "resource violates plan"}, key: "k1", rev: "r1", policyKey: "p1",
			want: "the approval of preview Update web-k1-preview-1 is void: the update held to its plan failed: resource violates plan"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := &pulumiv1.Stack{}
			sw := tt.sw
			sw.Approval = tt.approval
			st.Status.Stackwright, st.Status.LastUpdate = &sw, tt.last
			s := &scope{stack: st, key: tt.key, artifact: source.Artifact{Revision: tt.rev}, policyKey: tt.policyKey}
			got := (&Reconciler{}).voidApproval(s, tt.approval)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("voidApproval (-want +got):\n%s", diff)
			}
		})
	}
}

// A successful preview of an Auto-approval Stack is approved, whether policies judged it
// or none did (a rollout's preview gate previews Stacks no policy selects: their preview has
// no policy results at all).
func TestReconciler_ObservePreview_ApprovesWithOrWithoutPolicyResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy *v1alpha1.PolicyResults
	}{
		{name: "NoPolicyResults"},
		{name: "NoPolicyEvaluated", policy: &v1alpha1.PolicyResults{}},
		{name: "PoliciesPassed", policy: &v1alpha1.PolicyResults{Evaluated: []string{"p"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := &pulumiv1.Stack{Status: pulumiv1.StackStatus{Stackwright: &pulumiv1.StackwrightStatus{
				Approval: &pulumiv1.ApprovalStatus{Preview: "web-k1-preview-1", State: pulumiv1.ApprovalPreviewing, DesiredStateKey: "k1"},
			}}}
			u := &v1alpha1.Update{Status: v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseSucceeded, Message: "preview succeeded: 1 to create",
				Changes: map[string]int64{"create": 1}, Policy: tt.policy}}
			u.Name = "web-k1-preview-1"
			if _, err := (&Reconciler{}).observePreview(&scope{stack: st}, u); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(pulumiv1.ApprovalApproved, st.Status.Stackwright.Approval.State); diff != "" {
				t.Errorf("approval state (-want +got):\n%s", diff)
			}
		})
	}
}
