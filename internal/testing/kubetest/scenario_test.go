package kubetest

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

func TestConditionMet_Program_GenerationStatusAndReason(t *testing.T) {
	ready := func(status metav1.ConditionStatus, reason string, gen int64) metav1.Condition {
		return metav1.Condition{Type: pulumiv1.ConditionReady, Status: status, Reason: reason, Message: "msg", ObservedGeneration: gen}
	}
	tests := []struct {
		name       string
		conditions []metav1.Condition
		reason     string
		// wantErr is a substring of the error; "" means the condition is met.
		wantErr string
	}{
		{name: "met", conditions: []metav1.Condition{ready(metav1.ConditionTrue, "Done", 2)}, reason: "Done"},
		{name: "any reason", conditions: []metav1.Condition{ready(metav1.ConditionTrue, "Done", 2)}},
		{name: "missing", wantErr: "no Ready condition"},
		{name: "other condition only", conditions: []metav1.Condition{{Type: pulumiv1.ConditionStalled, Status: metav1.ConditionTrue, ObservedGeneration: 2}}, wantErr: "no Ready condition"},
		// Right status and reason, but about the spec before the last change.
		{name: "earlier generation", conditions: []metav1.Condition{ready(metav1.ConditionTrue, "Done", 1)}, reason: "Done", wantErr: "for generation 1, not 2"},
		{name: "wrong status", conditions: []metav1.Condition{ready(metav1.ConditionFalse, "Done", 2)}, reason: "Done", wantErr: "is False, not True"},
		{name: "wrong reason", conditions: []metav1.Condition{ready(metav1.ConditionTrue, "Progressing", 2)}, reason: "Done", wantErr: "reason Progressing, not Done"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 2}}
			p.Status.Conditions = tc.conditions
			err := conditionMet(p, pulumiv1.ConditionReady, metav1.ConditionTrue, tc.reason)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("conditionMet() = %v; want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("conditionMet() = %v; want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
