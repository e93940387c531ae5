package program

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// Flux health checks and cli-utils appliers judge a Program with kstatus, from its status
// alone; Argo CD has no health check for pulumi.com/Program. Every status the controller's
// setters produce must read as a user reads the Program.
func TestProgramStatus_Kstatus_EveryState(t *testing.T) {
	now := metav1.Now()
	ready := func(p *pulumiv1.Program) {
		markReady(p, rendered{digest: "sha256:a", revision: "generation/1", size: 10, path: "sha256/a.tar.gz"}, now)
	}
	tests := []struct {
		name string
		// reconcile runs the setters of the reconciles so far, each with its generation.
		reconcile []func(p *pulumiv1.Program)
		// generation is the Program's generation when it is read.
		generation int64
		want       kstatus.Status
		gap        string
	}{
		{
			name: "neverReconciled", generation: 1, want: kstatus.CurrentStatus,
			gap: "kstatus reads a Program without status as Current; a Stack that uses it waits for its artifact in any case",
		},
		{name: "rendered", reconcile: []func(*pulumiv1.Program){ready}, generation: 1, want: kstatus.CurrentStatus},
		{name: "newGenerationNotYetRendered", reconcile: []func(*pulumiv1.Program){ready}, generation: 2, want: kstatus.InProgressStatus},
		{
			name:       "specCannotRender",
			reconcile:  []func(*pulumiv1.Program){func(p *pulumiv1.Program) { markStalled(p, pulumiv1.ReasonSpecInvalid, "resource a: unknown type") }},
			generation: 1, want: kstatus.FailedStatus,
		},
		{
			name: "storeFailingAfterAnEarlierRender",
			reconcile: []func(*pulumiv1.Program){ready, func(p *pulumiv1.Program) {
				markRetrying(p, "failed to store artifact sha256:b: disk full")
			}},
			generation: 2, want: kstatus.InProgressStatus,
		},
		{
			name: "fixedAfterStalling",
			reconcile: []func(*pulumiv1.Program){
				func(p *pulumiv1.Program) { markStalled(p, pulumiv1.ReasonSpecInvalid, "resource a: unknown type") },
				ready,
			},
			generation: 2, want: kstatus.CurrentStatus,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &pulumiv1.Program{
				TypeMeta:   metav1.TypeMeta{APIVersion: pulumiv1.GroupVersion.String(), Kind: "Program"},
				ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
			}
			for i, set := range tt.reconcile {
				p.Generation = int64(i + 1)
				set(p)
				finalizeStatus(p)
			}
			p.Generation = tt.generation
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
			if err != nil {
				t.Fatalf("failed to convert Program: %v", err)
			}
			res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
			if err != nil {
				t.Fatalf("failed to compute kstatus of Program: %v", err)
			}
			if tt.gap != "" {
				t.Logf("known gap: %s", tt.gap)
			}
			if res.Status != tt.want {
				t.Errorf("kstatus = %s (%q), want %s; status %+v", res.Status, res.Message, tt.want, p.Status)
			}
		})
	}
}
