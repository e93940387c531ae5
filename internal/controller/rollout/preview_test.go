package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

func TestPreviewFaults_Rules(t *testing.T) {
	step := func(op, name string) v1alpha1.UpdateStep {
		return v1alpha1.UpdateStep{Op: op, URN: "urn:pulumi:s::p::t::" + name}
	}
	two := int32(2)
	all := &v1alpha1.RolloutPreviewGate{NoDeletes: true, NoReplaces: true, MaxChanges: &two}
	tests := []struct {
		name    string
		gate    *v1alpha1.RolloutPreviewGate
		steps   []v1alpha1.UpdateStep
		omitted int32
		want    []string
	}{
		{name: "NothingPlanned", gate: all},
		{name: "CreatesAndUpdatesPass", gate: all, steps: []v1alpha1.UpdateStep{step("create", "a"), step("update", "b"), step("same", "c")}},
		{name: "DeleteFails", gate: all, steps: []v1alpha1.UpdateStep{step("delete", "a")},
			want: []string{"deletes 1 resource(s): urn:pulumi:s::p::t::a"}},
		{name: "DeleteAllowedWithoutTheRule", gate: &v1alpha1.RolloutPreviewGate{NoReplaces: true}, steps: []v1alpha1.UpdateStep{step("delete", "a")}},
		{name: "AReplacementCountsOnce", gate: all, steps: []v1alpha1.UpdateStep{step("create-replacement", "a"), step("replace", "a"), step("delete-replaced", "a")},
			want: []string{"replaces 1 resource(s): urn:pulumi:s::p::t::a"}},
		{name: "TooManyChanges", gate: all, steps: []v1alpha1.UpdateStep{step("create", "a"), step("update", "b"), step("create", "c")},
			want: []string{"changes 3 resource(s), more than maxChanges 2"}},
		{name: "OmittedStepsCount", gate: all, steps: []v1alpha1.UpdateStep{step("create", "a")}, omitted: 2,
			want: []string{"changes 3 resource(s), more than maxChanges 2"}},
		{name: "EveryFault", gate: all, steps: []v1alpha1.UpdateStep{step("delete", "a"), step("replace", "b"), step("create", "c")},
			want: []string{"deletes 1 resource(s): urn:pulumi:s::p::t::a", "replaces 1 resource(s): urn:pulumi:s::p::t::b", "changes 3 resource(s), more than maxChanges 2"}},
		{name: "NoRulePassesAnything", gate: &v1alpha1.RolloutPreviewGate{}, steps: []v1alpha1.UpdateStep{step("delete", "a"), step("replace", "b")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &v1alpha1.Update{Status: v1alpha1.UpdateStatus{Steps: tt.steps, StepsOmitted: tt.omitted}}
			if diff := cmp.Diff(tt.want, previewFaults(tt.gate, u)); diff != "" {
				t.Errorf("faults (-want +got):\n%s", diff)
			}
		})
	}
}
