package instance

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/statustest"
)

// An instance repeats its Stack's messages only where its template says Full: the default
// gives the tenant reasons and states, with a message of Stackwright's making that names
// where the details are, never the platform's text (which may name its Secrets). A
// policy's verdict, written for the tenant, is the exception.
func TestMirror_InstanceMessages_PlatformTextOnlyWhenFull(t *testing.T) {
	const secretText = "failed to read Secret platform/cloud-admin-keys"
	stack := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "db-team-a-orders-1a2b3c4d", Generation: 2,
			Annotations: map[string]string{instanceGenerationAnnotation: "1"}},
	}
	stack.Status.ObservedGeneration = 2
	stack.Status.Conditions = []metav1.Condition{
		{Type: pulumiv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: pulumiv1.ReasonSpecInvalid, Message: secretText},
		{Type: pulumiv1.ConditionReady, Status: metav1.ConditionFalse, Reason: pulumiv1.ReasonSpecInvalid, Message: secretText},
	}
	stack.Status.LastUpdate = &pulumiv1.StackUpdateState{Type: "up", State: pulumiv1.UpdateStateFailed, Message: "up failed: " + secretText}
	tests := []struct {
		policy      v1alpha1.InstanceMessagePolicy
		wantSecrets bool
	}{
		{policy: ""},
		{policy: v1alpha1.InstanceMessagesReasons},
		{policy: v1alpha1.InstanceMessagesFull, wantSecrets: true},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			obj.SetGeneration(1)
			in := &instance{obj: obj}
			mirror(in, stack, tt.policy)

			var texts []string
			for _, c := range in.status.Conditions {
				texts = append(texts, c.Message)
			}
			texts = append(texts, in.status.LastUpdate.Message)
			for _, text := range texts {
				if got := strings.Contains(text, secretText); got != tt.wantSecrets {
					t.Errorf("message %q repeats the platform's text: %v; want %v", text, got, tt.wantSecrets)
				}
				if !tt.wantSecrets && !strings.Contains(text, "platform/db-team-a-orders-1a2b3c4d") {
					t.Errorf("message %q does not say where the details are", text)
				}
			}
			var reasons []string
			for _, c := range in.status.Conditions {
				reasons = append(reasons, c.Type+"="+c.Reason)
			}
			if diff := cmp.Diff([]string{"Ready=NotReadyStalled", "Stalled=SpecInvalid"}, sorted(reasons)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if in.status.LastUpdate.State != string(pulumiv1.UpdateStateFailed) {
				t.Errorf("last update state = %q", in.status.LastUpdate.State)
			}
		})
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func TestMirror_InstanceMessages_PolicyVerdictsPassThrough(t *testing.T) {
	const verdict = "3 replicas over the platform's limit of 2"
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "db-x", Annotations: map[string]string{instanceGenerationAnnotation: "1"}}}
	stack.Status.Conditions = []metav1.Condition{
		{Type: pulumiv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: pulumiv1.ReasonPolicyViolation, Message: verdict},
	}
	obj := &unstructured.Unstructured{}
	obj.SetGeneration(1)
	in := &instance{obj: obj}
	mirror(in, stack, v1alpha1.InstanceMessagesReasons)
	if c := apimeta.FindStatusCondition(in.status.Conditions, pulumiv1.ConditionStalled); c == nil || c.Message != verdict {
		t.Errorf("Stalled = %+v; want the policy's verdict %q", c, verdict)
	}
}

// gen builds the conditions the setters write on an object of generation 2.
var gen = statustest.Generation(2)

func TestSetters_Conditions_SayWhatTheInstanceWaitsFor(t *testing.T) {
	tmpl := &v1alpha1.StackTemplate{ObjectMeta: metav1.ObjectMeta{Name: "db"}}
	tmpl.Spec.API = v1alpha1.TemplateAPI{Group: "db.example.com", Kind: "Database", Plural: "databases"}
	tmpl.Status.Revision = 4
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "db-team-a-orders-1a2b3c4d"}}
	deleting := stack.DeepCopy()
	deleting.Status.Conditions = []metav1.Condition{{Type: pulumiv1.ConditionReady, Status: metav1.ConditionFalse, Reason: pulumiv1.ReasonNotReadyInProgress, Message: "Running destroy (Update d-1)"}}
	tests := []struct {
		name string
		set  func(*instance)
		want []metav1.Condition
	}{
		{
			name: "TemplateNotServing",
			set:  func(in *instance) { markTemplateNotServing(in, "db") },
			want: gen.Reconciling(v1alpha1.ReasonTemplateNotReady, "StackTemplate db is not serving; the stack stays as it is"),
		},
		{
			name: "NamespaceNotAllowed",
			set:  func(in *instance) { markNamespaceNotAllowed(in, "db") },
			want: gen.Stalled(v1alpha1.ReasonNamespaceNotAllowed, "StackTemplate db does not serve namespace team-a (its namespaceSelector); ask the platform team"),
		},
		{
			name: "ParametersInvalid",
			set: func(in *instance) {
				markParametersInvalid(in, errors.New("parameter size is secret config size, so it must be a string, number or boolean"))
			},
			want: gen.Stalled(v1alpha1.ReasonParametersInvalid, "parameter size is secret config size, so it must be a string, number or boolean"),
		},
		{
			name: "StackConflict",
			set:  func(in *instance) { markStackConflict(in, stack) },
			want: gen.Stalled(v1alpha1.ReasonStackConflict, "Stack platform/db-team-a-orders-1a2b3c4d exists and is not this instance's"),
		},
		{
			name: "EarlierStackDeleting",
			set:  func(in *instance) { markEarlierStackDeleting(in, stack) },
			want: gen.Reconciling(v1alpha1.ReasonDestroying, "waiting for Stack platform/db-team-a-orders-1a2b3c4d of an earlier instance of this name to be deleted"),
		},
		{
			name: "LatestRevisionMissing",
			set:  func(in *instance) { markRevisionMissing(in, tmpl, 4) },
			want: gen.Reconciling(v1alpha1.ReasonTemplateNotReady, "waiting for StackTemplateRevision db-4 (revision 4 of StackTemplate db)"),
		},
		{
			name: "HeldRevisionGone",
			set:  func(in *instance) { markRevisionMissing(in, tmpl, 2) },
			want: gen.Reconciling(v1alpha1.ReasonTemplateNotReady, "waiting for StackTemplateRevision db-2 (revision 2 of StackTemplate db): it is gone, so the instance's Stack stays as it is; open a newer revision with the stackwright.dev/open-template-revision annotation on it"),
		},
		{
			name: "RevisionInvalid",
			set:  func(in *instance) { markRevisionInvalid(in, "db-4", errors.New("spec.stack.stack is not set")) },
			want: gen.Stalled(v1alpha1.ReasonTemplateNotReady, "StackTemplateRevision db-4: spec.stack.stack is not set"),
		},
		{
			name: "AwaitingApproval",
			set: func(in *instance) {
				in.status.Approval = &v1alpha1.InstanceApproval{State: string(pulumiv1.ApprovalAwaiting), Preview: "p-1", Summary: "1 to create"}
				markAwaitingApproval(in, tmpl, stack, "")
			},
			want: gen.Reconciling(pulumiv1.ReasonAwaitingApproval, "the change previewed by Update p-1 (1 to create) awaits approval by the platform team, on Stack platform/db-team-a-orders-1a2b3c4d: StackTemplate db names no approvers"),
		},
		{
			name: "OutputsConflict",
			set:  func(in *instance) { markOutputsConflict(in, "Secret", "db-conn") },
			want: gen.Stalled(v1alpha1.ReasonOutputsConflict, "Secret db-conn exists and is not this instance's: rename it, or name another in the spec"),
		},
		{
			name: "AwaitingStatusFields",
			set: func(in *instance) {
				markAwaitingStatusFields(in, []fieldGap{{field: "endpoint", why: "output url is not published yet"}, {field: "port", why: "output port is secret", warn: true}})
			},
			want: gen.Reconciling(v1alpha1.ReasonAwaitingStatusFields, "the stack is ready; waiting for the status fields endpoint (output url is not published yet), port (output port is secret)"),
		},
		{
			name: "DestroyingANewStack",
			set:  func(in *instance) { markDestroying(in, stack, "") },
			want: gen.Reconciling(v1alpha1.ReasonDestroying, "waiting for Stack platform/db-team-a-orders-1a2b3c4d to be deleted"),
		},
		{
			name: "DestroyingSaysWhatTheStackDoesWhereTheTemplateRepeatsMessages",
			set:  func(in *instance) { markDestroying(in, deleting, v1alpha1.InstanceMessagesFull) },
			want: gen.Reconciling(v1alpha1.ReasonDestroying, "waiting for Stack platform/db-team-a-orders-1a2b3c4d to be deleted: Running destroy (Update d-1)"),
		},
		{
			name: "DestroyingGivesOnlyTheReasonByDefault",
			set:  func(in *instance) { markDestroying(in, deleting, v1alpha1.InstanceMessagesReasons) },
			want: gen.Reconciling(v1alpha1.ReasonDestroying, "waiting for Stack platform/db-team-a-orders-1a2b3c4d to be deleted ("+deleting.Status.Conditions[0].Reason+")"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			obj.SetNamespace("team-a")
			obj.SetName("orders")
			obj.SetGeneration(2)
			in := &instance{obj: obj}
			// A condition of another kind of outcome, which each setter replaces.
			in.status.Conditions = []metav1.Condition{gen.Condition(pulumiv1.ConditionStalled, metav1.ConditionTrue, "Earlier", "earlier")}
			tt.set(in)
			if diff := cmp.Diff(tt.want, in.status.Conditions, statustest.Compare); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFinalizeStatus_ObservedGeneration_OnlyOnceSettled(t *testing.T) {
	tests := []struct {
		name string
		set  func(*instance)
		want int64
	}{
		{name: "Stalled", set: func(in *instance) { markNamespaceNotAllowed(in, "db") }, want: 2},
		{name: "Reconciling", set: func(in *instance) { markTemplateNotServing(in, "db") }, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			obj.SetGeneration(2)
			in := &instance{obj: obj, status: v1alpha1.InstanceStatus{ObservedGeneration: 1}}
			tt.set(in)
			finalizeStatus(in)
			if in.status.ObservedGeneration != tt.want {
				t.Errorf("observedGeneration = %d; want %d", in.status.ObservedGeneration, tt.want)
			}
		})
	}
}

// An instance announces its Stack's last operation once: when it first sees it, or sees
// another; the same operation seen again at the next reconcile is not news.
func TestUpdateEvent_LastOperation_AnnouncedWhenNew(t *testing.T) {
	at := func(sec int) *metav1.Time { return &metav1.Time{Time: time.Unix(int64(sec), 0)} }
	up := func(state string, t *metav1.Time) *v1alpha1.InstanceUpdate {
		return &v1alpha1.InstanceUpdate{Type: "up", State: state, Message: "m", Time: t}
	}
	tests := []struct {
		name           string
		before, after  *v1alpha1.InstanceUpdate
		want           bool
		typ, wantEvent string
	}{
		{name: "NoneYet"},
		{name: "First", after: up("succeeded", at(1)), want: true, typ: corev1.EventTypeNormal, wantEvent: EventUpdateSucceeded},
		{name: "SameAgain", before: up("succeeded", at(1)), after: up("succeeded", at(1))},
		{name: "NextOne", before: up("succeeded", at(1)), after: up("failed", at(2)), want: true, typ: corev1.EventTypeWarning, wantEvent: EventUpdateFailed},
		{name: "SameTimeOtherType", before: up("succeeded", at(1)), after: &v1alpha1.InstanceUpdate{Type: "refresh", State: "succeeded", Time: at(1)}, want: true, typ: corev1.EventTypeNormal, wantEvent: EventUpdateSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := updateChanged(tt.before, tt.after); got != tt.want {
				t.Fatalf("updateChanged() = %v; want %v", got, tt.want)
			}
			if !tt.want {
				return
			}
			typ, reason := updateEvent(tt.after)
			if diff := cmp.Diff([]string{tt.typ, tt.wantEvent}, []string{typ, reason}); diff != "" {
				t.Errorf("updateEvent() (-want +got):\n%s", diff)
			}
		})
	}
}
