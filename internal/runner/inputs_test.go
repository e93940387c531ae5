package runner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/inputs"
)

func TestCheckInputs_DecidedOnOtherInputs(t *testing.T) {
	t.Parallel()
	decided := &v1alpha1.UpdateInputs{StackGeneration: 4, Fingerprint: "f1"}
	for _, tc := range []struct {
		name        string
		op          v1alpha1.UpdateType
		decided     *v1alpha1.UpdateInputs
		generation  int64
		fingerprint string
		want        string // the fault's reason, "" when the run may go on
	}{
		{name: "SameInputsRun", op: v1alpha1.UpdateTypeUp, decided: decided, generation: 4, fingerprint: "f1"},
		{name: "EditedReferenceRefused", op: v1alpha1.UpdateTypeUp, decided: decided, generation: 4, fingerprint: "f2", want: v1alpha1.ReasonTransientFailure},
		{name: "NewSpecRefused", op: v1alpha1.UpdateTypePreview, decided: decided, generation: 5, fingerprint: "f1", want: v1alpha1.ReasonTransientFailure},
		{name: "DestroyRunsWhateverTheInputs", op: v1alpha1.UpdateTypeDestroy, decided: decided, generation: 5, fingerprint: "f2"},
		{name: "UpdateOfAnEarlierVersionRuns", op: v1alpha1.UpdateTypeUp, generation: 5, fingerprint: "f2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := &v1alpha1.Update{Spec: v1alpha1.UpdateSpec{Type: tc.op, Inputs: tc.decided}}
			stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Generation: tc.generation}}
			err := checkInputs(u, stack, &inputs.Inputs{Fingerprint: tc.fingerprint})
			got := ""
			if f, ok := fault.As(err); ok {
				got = f.Reason
			} else if err != nil {
				t.Fatalf("error %v is not a fault", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reason (-want +got):\n%s", diff)
			}
		})
	}
}
