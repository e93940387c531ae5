package runner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/fault"
)

func TestFailure_Error_MapsToRetryReason(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantReason string
		wantResult v1alpha1.UpdateResult
	}{
		{name: "missingSecretIsTransient", err: fault.Retry(pulumiv1.ReasonConfigUnavailable, "Secret %q not found", "x"), wantReason: v1alpha1.ReasonTransientFailure, wantResult: v1alpha1.UpdateResultFailed},
		{name: "invalidSpecIsPermanent", err: fault.Stall(pulumiv1.ReasonSpecInvalid, "no Pulumi.yaml"), wantReason: v1alpha1.ReasonPermanentFailure, wantResult: v1alpha1.UpdateResultFailed},
		{name: "cancelled", err: fmt.Errorf("failed to update stack: %w", context.Canceled), wantReason: v1alpha1.ReasonCancelled, wantResult: v1alpha1.UpdateResultCancelled},
		{name: "lockHeldIsConflict", err: errors.New("error: the stack is currently locked by 1 lock(s)"), wantReason: v1alpha1.ReasonUpdateConflict, wantResult: v1alpha1.UpdateResultFailed},
		{name: "networkIsTransient", err: errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), wantReason: v1alpha1.ReasonTransientFailure, wantResult: v1alpha1.UpdateResultFailed},
		{name: "unknownIsPermanent", err: errors.New("error: something odd"), wantReason: v1alpha1.ReasonPermanentFailure, wantResult: v1alpha1.UpdateResultFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, result, msg := failure(tt.err)
			if reason != tt.wantReason || result != tt.wantResult {
				t.Errorf("failure() = %s, %s; want %s, %s", reason, result, tt.wantReason, tt.wantResult)
			}
			if msg == "" {
				t.Errorf("failure() gave no message")
			}
		})
	}
}

func TestFinish_Outcome_FillsStatusAndCondition(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	ok := &v1alpha1.Update{}
	Finish(ok, engine.Result{Message: "up succeeded: 2 created", Changes: map[string]int{"create": 2}}, nil, "log", now)
	if diff := cmp.Diff(map[string]int64{"create": 2}, ok.Status.Changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if ok.Status.Phase != v1alpha1.UpdatePhaseSucceeded || ok.Status.Result != v1alpha1.UpdateResultSucceeded || ok.Status.LogTail != "log" || !ok.Status.EndTime.Time.Equal(now) {
		t.Errorf("status after success = %+v", ok.Status)
	}
	if !apimeta.IsStatusConditionTrue(ok.Status.Conditions, v1alpha1.ConditionComplete) {
		t.Errorf("Complete condition not True after success: %v", ok.Status.Conditions)
	}

	failed := &v1alpha1.Update{}
	Finish(failed, engine.Result{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "no Pulumi.yaml in %q", "sub"), "", now)
	c := apimeta.FindStatusCondition(failed.Status.Conditions, v1alpha1.ConditionComplete)
	if failed.Status.Phase != v1alpha1.UpdatePhaseFailed || c == nil || c.Reason != v1alpha1.ReasonPermanentFailure || c.Message != `no Pulumi.yaml in "sub"` {
		t.Errorf("status after failure = %+v, condition %+v", failed.Status, c)
	}
}

func TestEnsureFileBackend_URL_CreatesOnlyLocalDirectories(t *testing.T) {
	dir := t.TempDir() + "/state/ns"
	for _, url := range []string{"", "https://api.pulumi.com", "s3://bucket", "file://~/state"} {
		if err := EnsureFileBackend(url); err != nil {
			t.Errorf("EnsureFileBackend(%q) = %v; want nil and nothing created", url, err)
		}
	}
	if err := EnsureFileBackend("file://" + dir); err != nil {
		t.Fatal(err)
	}
	if err := EnsureFileBackend("file://" + dir); err != nil {
		t.Errorf("second call = %v; want it idempotent", err)
	}
}
