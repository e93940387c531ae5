package runner

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/fault"
)

// Flux health checks and cli-utils appliers judge an Update with kstatus, from its status
// alone. Every status the runner and the lost-runner watchdogs write must read as a user
// reads the Update: running is in progress, failed is failed, succeeded is done.
func TestUpdateStatus_Kstatus_EveryPhase(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	claimed := func(u *v1alpha1.Update) { u.MarkRunning("local/manager-0/42", metav1.NewTime(now)) }
	tests := []struct {
		name  string
		write func(u *v1alpha1.Update)
		want  kstatus.Status
		// gap is what a user would rather see; the case pins today's reading.
		gap string
	}{
		{
			name:  "createdNotStarted",
			write: func(*v1alpha1.Update) {},
			want:  kstatus.CurrentStatus,
			gap:   "an Update the Stack controller created has no status until a runner claims it, or (bound to the local executor's runner) until it has run 10 s or finished, and kstatus reads that as Current; waiters should wait on the Stack, whose Reconciling covers it",
		},
		{name: "running", write: claimed, want: kstatus.InProgressStatus},
		{
			name: "succeeded",
			write: func(u *v1alpha1.Update) {
				claimed(u)
				Finish(u, engine.Result{Message: "up succeeded"}, nil, "", now)
			},
			want: kstatus.CurrentStatus,
		},
		{
			name: "failedPermanently",
			write: func(u *v1alpha1.Update) {
				claimed(u)
				Finish(u, engine.Result{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "no Pulumi.yaml"), "", now)
			},
			want: kstatus.FailedStatus,
		},
		{
			name: "failedTransiently",
			write: func(u *v1alpha1.Update) {
				claimed(u)
				Finish(u, engine.Result{}, errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), "", now)
			},
			want: kstatus.FailedStatus,
		},
		{
			name: "runnerLost",
			write: func(u *v1alpha1.Update) {
				claimed(u)
				u.MarkRunnerLost(v1alpha1.UpdateResultCancelled, v1alpha1.ReasonRunnerLost, "runner gone", metav1.NewTime(now))
			},
			want: kstatus.FailedStatus,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &v1alpha1.Update{
				TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Update"},
				ObjectMeta: metav1.ObjectMeta{Name: "u", Namespace: "ns", Generation: 1},
				Spec:       v1alpha1.UpdateSpec{StackName: "s", Type: v1alpha1.UpdateTypeUp, Attempt: 1},
			}
			tt.write(u)
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(u)
			if err != nil {
				t.Fatalf("failed to convert Update: %v", err)
			}
			res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
			if err != nil {
				t.Fatalf("failed to compute kstatus of Update: %v", err)
			}
			if tt.gap != "" {
				t.Logf("known gap: %s", tt.gap)
			}
			if res.Status != tt.want {
				t.Errorf("kstatus = %s (%q), want %s; conditions %+v", res.Status, res.Message, tt.want, u.Status.Conditions)
			}
		})
	}
}
