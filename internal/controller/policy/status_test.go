package policy

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

func TestMarkCompiled_Conditions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want map[string]string // condition type → "status reason"
	}{
		{name: "CompiledIsReady", want: map[string]string{pulumiv1.ConditionReady: "True " + ReasonCompiled}},
		{name: "CompileErrorStalls", err: errors.New("1 error occurred: broken.rego:4: rego_parse_error: unexpected eof token"), want: map[string]string{
			pulumiv1.ConditionReady: "False " + pulumiv1.ReasonNotReadyStalled, pulumiv1.ConditionStalled: "True " + ReasonCompileError,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, o := range []object{newPolicy(), newClusterPolicy()} {
				o.obj.SetGeneration(3)
				markCompiled(o, tt.err)
				finalizeStatus(o)
				got := map[string]string{}
				for _, c := range o.obj.GetConditions() {
					got[c.Type] = string(c.Status) + " " + c.Reason
					if tt.err != nil && c.Type == pulumiv1.ConditionStalled && c.Message != tt.err.Error() {
						t.Errorf("Stalled message = %q; want the compiler's", c.Message)
					}
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%T conditions (-want +got):\n%s", o.obj, diff)
				}
				if o.status.ObservedGeneration != 3 {
					t.Errorf("observedGeneration = %d; want 3", o.status.ObservedGeneration)
				}
			}
		})
	}
}
