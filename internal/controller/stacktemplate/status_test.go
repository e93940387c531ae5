package stacktemplate

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/statustest"
)

// gen builds the conditions the setters write on an object of generation 3.
var gen = statustest.Generation(3)

func TestSetters_Conditions_SayWhatTheTemplateWaitsFor(t *testing.T) {
	tests := []struct {
		name          string
		set           func(*v1alpha1.StackTemplate)
		want          []metav1.Condition
		wantInstances int32
	}{
		{
			name: "GroupNotAllowed",
			set:  func(t *v1alpha1.StackTemplate) { markGroupNotAllowed(t, []string{"a.example.com", "b.example.com"}) },
			want: gen.Stalled(v1alpha1.ReasonAPIGroupNotAllowed, "this install serves templates of the API groups [a.example.com b.example.com] only (--template-api-groups), not db.example.com"),
		},
		{
			name: "Invalid",
			set:  func(t *v1alpha1.StackTemplate) { markInvalid(t, "spec.stack is not set") },
			want: gen.Stalled(v1alpha1.ReasonTemplateInvalid, "spec.stack is not set"),
		},
		{
			name: "DefinitionConflict",
			set:  func(t *v1alpha1.StackTemplate) { markDefinitionConflict(t, "databases.db.example.com") },
			want: gen.Stalled(v1alpha1.ReasonDefinitionConflict, "CustomResourceDefinition databases.db.example.com exists and was not created for this template: Stackwright never takes one over"),
		},
		{
			name: "DefinitionRefused",
			set: func(t *v1alpha1.StackTemplate) {
				markDefinitionRefused(t, "databases.db.example.com", errors.New("spec.versions[0].schema: Invalid value"))
			},
			want: gen.Stalled(v1alpha1.ReasonTemplateInvalid, "the API server refused CustomResourceDefinition databases.db.example.com: spec.versions[0].schema: Invalid value"),
		},
		{
			name: "Establishing",
			set:  func(t *v1alpha1.StackTemplate) { markEstablishing(t, "databases.db.example.com") },
			want: gen.Reconciling(v1alpha1.ReasonEstablishing, "waiting for the API server to establish CustomResourceDefinition databases.db.example.com"),
		},
		{
			name: "Ready",
			set:  func(t *v1alpha1.StackTemplate) { markReady(t, "databases.db.example.com") },
			want: []metav1.Condition{gen.Condition(pulumiv1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonServing, "serving Database (databases.db.example.com) at revision 3")},
		},
		{
			name:          "InstancesRemain",
			set:           func(t *v1alpha1.StackTemplate) { markInstancesRemain(t, 2, "team-a/orders") },
			want:          gen.Reconciling(v1alpha1.ReasonInstancesRemain, "2 Database instance(s) remain, e.g. team-a/orders: the template is removed once they are deleted (each destroys its stack first)"),
			wantInstances: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := &v1alpha1.StackTemplate{ObjectMeta: metav1.ObjectMeta{Name: "databases", Generation: 3}}
			tmpl.Spec.API = v1alpha1.TemplateAPI{Group: "db.example.com", Kind: "Database", Plural: "databases"}
			// A condition of another kind of outcome, which each setter replaces.
			tmpl.Status.Conditions = []metav1.Condition{gen.Condition(pulumiv1.ConditionStalled, metav1.ConditionTrue, "Earlier", "earlier")}
			tt.set(tmpl)
			if diff := cmp.Diff(tt.want, tmpl.Status.Conditions, statustest.Compare); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if tmpl.Status.Instances != tt.wantInstances {
				t.Errorf("status.instances = %d; want %d", tmpl.Status.Instances, tt.wantInstances)
			}
		})
	}
}

func TestFinalizeStatus_ObservedGeneration_OnlyOnceSettled(t *testing.T) {
	tests := []struct {
		name string
		set  func(*v1alpha1.StackTemplate)
		want int64
	}{
		{name: "Ready", set: func(t *v1alpha1.StackTemplate) { markReady(t, "d") }, want: 3},
		{name: "Stalled", set: func(t *v1alpha1.StackTemplate) { markInvalid(t, "bad") }, want: 3},
		{name: "Establishing", set: func(t *v1alpha1.StackTemplate) { markEstablishing(t, "d") }, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := &v1alpha1.StackTemplate{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			tmpl.Status.ObservedGeneration = 2
			tt.set(tmpl)
			finalizeStatus(tmpl)
			if tmpl.Status.ObservedGeneration != tt.want {
				t.Errorf("observedGeneration = %d; want %d", tmpl.Status.ObservedGeneration, tt.want)
			}
			if c := apimeta.FindStatusCondition(tmpl.Status.Conditions, pulumiv1.ConditionReconciling); c != nil && tt.want == 3 {
				t.Errorf("Reconciling outlived a settled generation: %+v", c)
			}
		})
	}
}
