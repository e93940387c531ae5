package job

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/engine"
)

var (
	resultNow   = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	resultStart = &metav1.Time{Time: resultNow.Add(-time.Hour)}
)

// succeededResult is a report as runner.Finish makes it for a successful up.
func succeededResult() *Result {
	end := metav1.NewTime(resultNow.Add(-time.Minute))
	return &Result{
		UpdateUID: "uid-1",
		Status: v1alpha1.UpdateStatus{
			Phase: v1alpha1.UpdatePhaseSucceeded, Result: v1alpha1.UpdateResultSucceeded, Message: "up succeeded: 1 created",
			EndTime: &end, LogTail: "Updating (dev)\n", Permalink: "https://app.pulumi.com/org/proj/dev/updates/3",
			Changes: map[string]int64{"create": 1, "same": 2},
			Steps:   []v1alpha1.UpdateStep{{Op: "create", URN: "urn:pulumi:dev::p::t::f", Type: "t"}},
			Conditions: []metav1.Condition{{
				Type: v1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSucceeded, Message: "up succeeded: 1 created",
			}},
		},
		Outputs: map[string]engine.Output{"path": {Value: "web.txt"}},
	}
}

// failedResult is a report as runner.Finish makes it for a failed up.
func failedResult(result v1alpha1.UpdateResult, reason string) *Result {
	r := succeededResult()
	r.Status.Phase, r.Status.Result, r.Status.Message = v1alpha1.UpdatePhaseFailed, result, "up failed"
	r.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionComplete, Status: metav1.ConditionFalse, Reason: reason, Message: "up failed"}}
	return r
}

func TestSanitizeResult_Bounds_InformativeFieldsCut(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	manySteps := func(n int) []v1alpha1.UpdateStep {
		steps := make([]v1alpha1.UpdateStep, n)
		for i := range steps {
			steps[i] = v1alpha1.UpdateStep{Op: "create", URN: fmt.Sprintf("urn:%d", i)}
		}
		return steps
	}
	// A step of about 66 KiB as JSON: four exceed maxStepsBytes.
	heavy := v1alpha1.UpdateStep{Op: "update", URN: "urn:heavy", Changed: strings.Split(strings.TrimSuffix(strings.Repeat(long(maxStepTextBytes)+",", maxStepProperties), ","), ",")}
	for _, tc := range []struct {
		name string
		in   func(*Result)
		want func(*Result)
	}{
		{
			name: "a report as runner.Finish makes it is kept",
			in:   func(*Result) {},
			want: func(*Result) {},
		},
		{
			name: "failed run's report is kept, outputs dropped",
			in: func(r *Result) {
				*r = *failedResult(v1alpha1.UpdateResultCancelled, v1alpha1.ReasonCancelled)
			},
			want: func(r *Result) {
				*r = *failedResult(v1alpha1.UpdateResultCancelled, v1alpha1.ReasonCancelled)
				r.Outputs = nil
			},
		},
		{
			name: "long message is cut, in status and condition",
			in: func(r *Result) {
				r.Status.Message, r.Status.Conditions[0].Message = long(1<<20), long(1<<20)
			},
			want: func(r *Result) {
				r.Status.Message = long(maxMessageBytes-len("…")) + "…"
				r.Status.Conditions[0].Message = r.Status.Message
			},
		},
		{
			name: "long log tail keeps its end",
			in: func(r *Result) {
				r.Status.LogTail = "start" + long(1<<20) + "end"
			},
			want: func(r *Result) {
				r.Status.LogTail = "…\n" + long(v1alpha1.MaxLogTailLength-len("…\n")-len("end")) + "end"
			},
		},
		{
			name: "permalink of another scheme is dropped",
			in:   func(r *Result) { r.Status.Permalink = "javascript:alert(1)" },
			want: func(r *Result) { r.Status.Permalink = "" },
		},
		{
			name: "permalink with credentials is dropped",
			in:   func(r *Result) { r.Status.Permalink = "https://app.pulumi.com@evil.example.com/" },
			want: func(r *Result) { r.Status.Permalink = "" },
		},
		{
			name: "relative permalink is dropped",
			in:   func(r *Result) { r.Status.Permalink = "/org/proj/dev/updates/3" },
			want: func(r *Result) { r.Status.Permalink = "" },
		},
		{
			name: "over-long permalink is dropped, not cut",
			in:   func(r *Result) { r.Status.Permalink = "https://example.com/" + long(maxPermalinkBytes) },
			want: func(r *Result) { r.Status.Permalink = "" },
		},
		{
			name: "http permalink is kept",
			in:   func(r *Result) { r.Status.Permalink = "http://backend.internal/updates/3" },
			want: func(r *Result) { r.Status.Permalink = "http://backend.internal/updates/3" },
		},
		{
			name: "changes keep the first kinds by name, without bad ones",
			in: func(r *Result) {
				r.Status.Changes = map[string]int64{"": 1, "delete": -1, long(maxChangeKindBytes + 1): 1}
				for i := range 2 * maxChangeKinds {
					r.Status.Changes[fmt.Sprintf("k%03d", i)] = int64(i)
				}
			},
			want: func(r *Result) {
				r.Status.Changes = map[string]int64{}
				for i := range maxChangeKinds {
					r.Status.Changes[fmt.Sprintf("k%03d", i)] = int64(i)
				}
			},
		},
		{
			name: "steps beyond MaxSteps are counted as omitted",
			in: func(r *Result) {
				r.Status.Steps, r.Status.StepsOmitted = manySteps(v1alpha1.MaxSteps+5), 10
			},
			want: func(r *Result) {
				r.Status.Steps, r.Status.StepsOmitted = manySteps(v1alpha1.MaxSteps), 15
			},
		},
		{
			name: "steps beyond the byte budget are counted as omitted",
			in: func(r *Result) {
				r.Status.Steps = []v1alpha1.UpdateStep{heavy, heavy, heavy, heavy, heavy}
			},
			want: func(r *Result) {
				r.Status.Steps, r.Status.StepsOmitted = []v1alpha1.UpdateStep{heavy, heavy, heavy}, 2
			},
		},
		{
			name: "step strings and lists are cut",
			in: func(r *Result) {
				r.Status.Steps = []v1alpha1.UpdateStep{{Op: "update", URN: long(1 << 20), Replacing: strings.Split(strings.Repeat("p,", 2*maxStepProperties), ",")}}
			},
			want: func(r *Result) {
				r.Status.Steps = []v1alpha1.UpdateStep{{Op: "update", URN: long(maxStepTextBytes-len("…")) + "…", Replacing: strings.Split(strings.Repeat("p,", maxStepProperties-1)+"p", ",")}}
			},
		},
		{
			name: "negative omitted steps count none",
			in:   func(r *Result) { r.Status.StepsOmitted = -3 },
			want: func(r *Result) { r.Status.StepsOmitted = 0 },
		},
		{
			name: "end time in the manager's future is now",
			in:   func(r *Result) { r.Status.EndTime = &metav1.Time{Time: resultNow.Add(24 * time.Hour)} },
			want: func(r *Result) { r.Status.EndTime = &metav1.Time{Time: resultNow} },
		},
		{
			name: "end time before the start is now",
			in:   func(r *Result) { r.Status.EndTime = &metav1.Time{Time: resultStart.Add(-time.Second)} },
			want: func(r *Result) { r.Status.EndTime = &metav1.Time{Time: resultNow} },
		},
		{
			name: "no end time is now",
			in:   func(r *Result) { r.Status.EndTime = nil },
			want: func(r *Result) { r.Status.EndTime = &metav1.Time{Time: resultNow} },
		},
		{
			name: "only the Complete condition is kept, as reported",
			in: func(r *Result) {
				r.Status.Conditions = append([]metav1.Condition{{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "X"}}, r.Status.Conditions...)
				r.Status.Conditions[1].ObservedGeneration, r.Status.Conditions[1].LastTransitionTime = 7, metav1.NewTime(resultNow)
			},
			want: func(*Result) {},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, want := succeededResult(), succeededResult()
			tc.in(got)
			tc.want(want)
			if err := sanitizeResult(got, resultStart, resultNow); err != nil {
				t.Fatalf("sanitizeResult: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Every reason runner.Finish gives a failure is recorded as the runner reports it: a
// missing plugin must reach the Stack as MissingPlugin, or it would be retried; a process
// of the runner killed out of memory as OOMKilled.
func TestSanitizeResult_RunnerFailureReasons_Recorded(t *testing.T) {
	for _, reason := range []string{
		v1alpha1.ReasonTransientFailure, v1alpha1.ReasonUpdateConflict, v1alpha1.ReasonPermanentFailure,
		v1alpha1.ReasonCancelled, v1alpha1.ReasonPlanInvalid, v1alpha1.ReasonMissingPlugin,
		v1alpha1.ReasonBackendUnsupported, v1alpha1.ReasonOOMKilled,
	} {
		t.Run(reason, func(t *testing.T) {
			r := failedResult(v1alpha1.UpdateResultFailed, reason)
			if err := sanitizeResult(r, resultStart, resultNow); err != nil {
				t.Fatalf("sanitizeResult: %v", err)
			}
			if c := apimeta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionComplete); c == nil || c.Reason != reason {
				t.Errorf("Complete condition = %+v; want reason %s", c, reason)
			}
		})
	}
}

func TestSanitizeResult_Refused_InvalidOutcomeOrTooLarge(t *testing.T) {
	manyOutputs := map[string]engine.Output{}
	for i := range maxOutputs + 1 {
		manyOutputs[fmt.Sprintf("o%d", i)] = engine.Output{Value: i}
	}
	for _, tc := range []struct {
		name    string
		in      func(*Result)
		wantErr string
	}{
		{
			name:    "phase still running",
			in:      func(r *Result) { r.Status.Phase = v1alpha1.UpdatePhaseRunning },
			wantErr: `the runner's report is invalid: phase "Running", result "succeeded", Complete condition "True" with reason "Succeeded"`,
		},
		{
			name:    "succeeded with result failed",
			in:      func(r *Result) { r.Status.Result = v1alpha1.UpdateResultFailed },
			wantErr: `the runner's report is invalid: phase "Succeeded", result "failed", Complete condition "True" with reason "Succeeded"`,
		},
		{
			name:    "succeeded with a failure's condition",
			in:      func(r *Result) { r.Status.Conditions[0].Status = metav1.ConditionFalse },
			wantErr: `the runner's report is invalid: phase "Succeeded", result "succeeded", Complete condition "False" with reason "Succeeded"`,
		},
		{
			name:    "failed claiming the manager's RunnerLost",
			in:      func(r *Result) { *r = *failedResult(v1alpha1.UpdateResultFailed, v1alpha1.ReasonRunnerLost) },
			wantErr: `the runner's report is invalid: phase "Failed", result "failed", Complete condition "False" with reason "RunnerLost"`,
		},
		{
			name:    "failed claiming the manager's Evicted",
			in:      func(r *Result) { *r = *failedResult(v1alpha1.UpdateResultFailed, v1alpha1.ReasonEvicted) },
			wantErr: `the runner's report is invalid: phase "Failed", result "failed", Complete condition "False" with reason "Evicted"`,
		},
		{
			name:    "OOMKilled claiming success",
			in:      func(r *Result) { *r = *failedResult(v1alpha1.UpdateResultSucceeded, v1alpha1.ReasonOOMKilled) },
			wantErr: `the runner's report is invalid: phase "Failed", result "succeeded", Complete condition "False" with reason "OOMKilled"`,
		},
		{
			name:    "failed with an unknown result",
			in:      func(r *Result) { *r = *failedResult("exploded", v1alpha1.ReasonPermanentFailure) },
			wantErr: `the runner's report is invalid: phase "Failed", result "exploded", Complete condition "False" with reason "PermanentFailure"`,
		},
		{
			name:    "huge phase is quoted cut",
			in:      func(r *Result) { r.Status.Phase = v1alpha1.UpdatePhase(strings.Repeat("P", 1<<20)) },
			wantErr: `the runner's report is invalid: phase "` + strings.Repeat("P", 61) + `…", result "succeeded", Complete condition "True" with reason "Succeeded"`,
		},
		{
			name:    "no Complete condition",
			in:      func(r *Result) { r.Status.Conditions = nil },
			wantErr: "the runner's report is invalid: it has no Complete condition",
		},
		{
			name:    "too many outputs",
			in:      func(r *Result) { r.Outputs = manyOutputs },
			wantErr: fmt.Sprintf("the runner's report was too large to record: it has %d outputs, more than the %d an Update may have", maxOutputs+1, maxOutputs),
		},
		{
			name: "outputs larger than their Secret",
			in: func(r *Result) {
				r.Outputs = map[string]engine.Output{"big": {Value: strings.Repeat("x", maxOutputsBytes)}}
			},
			wantErr: fmt.Sprintf("the runner's report was too large to record: its outputs take %d bytes, more than the %d an outputs Secret holds", len("big")+maxOutputsBytes+2, maxOutputsBytes),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := succeededResult()
			tc.in(r)
			got := ""
			if err := sanitizeResult(r, resultStart, resultNow); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// A failed run's outputs are not recorded, so they cannot make its report too large.
func TestSanitizeResult_FailedRunsOutputs_NotCounted(t *testing.T) {
	r := failedResult(v1alpha1.UpdateResultFailed, v1alpha1.ReasonPermanentFailure)
	r.Outputs = map[string]engine.Output{"big": {Value: strings.Repeat("x", 2*maxOutputsBytes)}}
	if err := sanitizeResult(r, resultStart, resultNow); err != nil {
		t.Fatalf("sanitizeResult: %v", err)
	}
	if r.Outputs != nil {
		t.Errorf("outputs = %d kept; want none", len(r.Outputs))
	}
}

// What is recorded instead of a refused report passes as a permanent failure.
func TestRefusedResult_IsAValidPermanentFailure(t *testing.T) {
	r := refusedResult("uid-1", "tail", fmt.Errorf("the runner's report was too large to record: %s", strings.Repeat("x", 1<<20)))
	if err := sanitizeResult(r, resultStart, resultNow); err != nil {
		t.Fatalf("sanitizeResult: %v", err)
	}
	got := map[string]any{
		"phase": r.Status.Phase, "result": r.Status.Result, "reason": r.Status.Conditions[0].Reason,
		"tail": r.Status.LogTail, "messageBytes": len(r.Status.Message),
	}
	want := map[string]any{
		"phase": v1alpha1.UpdatePhaseFailed, "result": v1alpha1.UpdateResultFailed, "reason": v1alpha1.ReasonPermanentFailure,
		"tail": "tail", "messageBytes": maxMessageBytes,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
