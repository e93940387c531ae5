package instance

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
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
	if c := findCondition(in.status.Conditions, pulumiv1.ConditionStalled); c == nil || c.Message != verdict {
		t.Errorf("Stalled = %+v; want the policy's verdict %q", c, verdict)
	}
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}
