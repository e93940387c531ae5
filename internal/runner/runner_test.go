package runner

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/scheme"
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
		{name: "unofferedBundleIsMissingPlugin", err: fault.Stall(pulumiv1.ReasonMissingPlugin, "bundle %q not offered", "aws"), wantReason: v1alpha1.ReasonMissingPlugin, wantResult: v1alpha1.UpdateResultFailed},
		{name: "missingProviderIsMissingPlugin", err: errors.New("error: no resource plugin 'pulumi-resource-aws' found in the workspace or on your $PATH"), wantReason: v1alpha1.ReasonMissingPlugin, wantResult: v1alpha1.UpdateResultFailed},
		{name: "environmentsOnSelfManagedBackendAreBackendUnsupported", err: errors.New("error: getting stack configuration: opening environment: backend runner-1 does not support environments; Pulumi ESC environments require the Pulumi Cloud backend, use `pulumi login` without arguments to log into the Pulumi Cloud backend"), wantReason: v1alpha1.ReasonBackendUnsupported, wantResult: v1alpha1.UpdateResultFailed},
		{name: "unknownIsPermanent", err: errors.New("error: something odd"), wantReason: v1alpha1.ReasonPermanentFailure, wantResult: v1alpha1.UpdateResultFailed},
		{name: "oomKilledIsOOMKilled", err: OOMKilled(errors.New("error: something odd"), 1, 256<<20), wantReason: v1alpha1.ReasonOOMKilled, wantResult: v1alpha1.UpdateResultFailed},
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

	healed := &v1alpha1.Update{}
	Finish(healed, engine.Result{Message: "up succeeded: 1 created", HealedLocks: []string{"web-abc-1-x7k2p (pid 7)"}}, nil, "", now)
	if want := "up succeeded: 1 created; removed 1 stale lock(s) held by run(s) that are gone: web-abc-1-x7k2p (pid 7)"; healed.Status.Message != want {
		t.Errorf("message after healing = %q; want %q", healed.Status.Message, want)
	}

	failed := &v1alpha1.Update{}
	Finish(failed, engine.Result{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "no Pulumi.yaml in %q", "sub"), "", now)
	c := apimeta.FindStatusCondition(failed.Status.Conditions, v1alpha1.ConditionComplete)
	if failed.Status.Phase != v1alpha1.UpdatePhaseFailed || c == nil || c.Reason != v1alpha1.ReasonPermanentFailure || c.Message != `no Pulumi.yaml in "sub"` {
		t.Errorf("status after failure = %+v, condition %+v", failed.Status, c)
	}
}

// A run during which processes of the runner were killed out of memory fails OOMKilled,
// naming the limit and how many were killed, with the engine's own message after.
func TestOOMKilled_Failure_NamesTheLimitAndKeepsTheEnginesMessage(t *testing.T) {
	engineErr := errors.New("error: pulumi-resource-stackwright-testing: rpc error: code = Unavailable desc = error reading from server: EOF")
	type outcome struct {
		Phase   v1alpha1.UpdatePhase
		Result  v1alpha1.UpdateResult
		Reason  string
		Message string
	}
	tests := []struct {
		name  string
		err   error
		kills uint64
		limit int64
		want  outcome
	}{
		{
			name: "oneKillUnderALimit", err: engineErr, kills: 1, limit: 256 << 20,
			want: outcome{v1alpha1.UpdatePhaseFailed, v1alpha1.UpdateResultFailed, v1alpha1.ReasonOOMKilled,
				"out of memory: the kernel killed a process of the runner (the runner's memory limit is 256Mi); the engine then failed: " +
					"pulumi-resource-stackwright-testing: rpc error: code = Unavailable desc = error reading from server: EOF"},
		},
		{
			name: "twoKillsWithoutALimit", err: engineErr, kills: 2,
			want: outcome{v1alpha1.UpdatePhaseFailed, v1alpha1.UpdateResultFailed, v1alpha1.ReasonOOMKilled,
				"out of memory: the kernel killed 2 processes of the runner (the runner has no memory limit of its own, so its Pod's or its node's memory ran out); the engine then failed: " +
					"pulumi-resource-stackwright-testing: rpc error: code = Unavailable desc = error reading from server: EOF"},
		},
		{
			name: "oddLimit", err: fault.Retry(v1alpha1.ReasonTransientFailure, "failed to fetch artifact"), kills: 1, limit: 299_999_232,
			want: outcome{v1alpha1.UpdatePhaseFailed, v1alpha1.UpdateResultFailed, v1alpha1.ReasonOOMKilled,
				"out of memory: the kernel killed a process of the runner (the runner's memory limit is 299999232 bytes (286.1Mi)); the engine then failed: failed to fetch artifact"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &v1alpha1.Update{}
			Finish(u, engine.Result{}, OOMKilled(tt.err, tt.kills, tt.limit), "", time.Now())
			got := outcome{Phase: u.Status.Phase, Result: u.Status.Result, Message: u.Status.Message}
			if c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete); c != nil {
				got.Reason = c.Reason
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
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

// lostUpdate is an Update of Stack web marked lost by the Update controller.
func lostUpdate(name, stack string, reason string) *v1alpha1.Update {
	u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1alpha1.UpdateSpec{StackName: stack, Type: v1alpha1.UpdateTypeUp, Attempt: 1}}
	u.MarkRunning("local/old-manager/1/abc", metav1.Now())
	if reason == v1alpha1.ReasonRunnerLost {
		u.MarkRunnerLost(v1alpha1.UpdateResultCancelled, v1alpha1.ReasonRunnerLost, "runner stopped", metav1.Now())
	} else {
		u.Status.Phase, u.Status.Result = v1alpha1.UpdatePhaseFailed, v1alpha1.UpdateResultFailed
		u.MarkFinished(metav1.Condition{Status: metav1.ConditionFalse, Reason: reason})
	}
	return u
}

func TestRunner_MarkRecovered_CorrectsOnlyTheLostRecord(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		lost       *v1alpha1.Update
		wantResult v1alpha1.UpdateResult
		wantReason string
	}{
		{name: "LostRunIsSucceeded", lost: lostUpdate("web-k-1", "web", v1alpha1.ReasonRunnerLost), wantResult: v1alpha1.UpdateResultSucceeded, wantReason: v1alpha1.ReasonRecovered},
		{name: "FailedRunIsLeftAlone", lost: lostUpdate("web-k-1", "web", v1alpha1.ReasonPermanentFailure), wantResult: v1alpha1.UpdateResultFailed, wantReason: v1alpha1.ReasonPermanentFailure},
		{name: "AnotherStacksUpdateIsLeftAlone", lost: lostUpdate("web-k-1", "api", v1alpha1.ReasonRunnerLost), wantResult: v1alpha1.UpdateResultCancelled, wantReason: v1alpha1.ReasonRunnerLost},
		{name: "PrunedUpdateIsNoError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := fakeClient(t).WithStatusSubresource(&v1alpha1.Update{})
			if tt.lost != nil {
				b = b.WithObjects(tt.lost)
			}
			r := &Runner{Client: b.Build()}
			retry := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: "web-k-2", Namespace: "default"}, Spec: v1alpha1.UpdateSpec{StackName: "web"}}
			if err := r.markRecovered(context.Background(), retry, &v1alpha1.RecoveredRun{Update: "web-k-1"}); err != nil {
				t.Fatalf("markRecovered: %v", err)
			}
			if tt.lost == nil {
				return
			}
			got := &v1alpha1.Update{}
			if err := r.Client.Get(context.Background(), client.ObjectKeyFromObject(tt.lost), got); err != nil {
				t.Fatal(err)
			}
			c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionComplete)
			if got.Status.Result != tt.wantResult || c.Reason != tt.wantReason {
				t.Errorf("lost Update reads %s, reason %s; want %s, reason %s", got.Status.Result, c.Reason, tt.wantResult, tt.wantReason)
			}
			stalled := apimeta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionStalled)
			if stalled != (tt.wantResult != v1alpha1.UpdateResultSucceeded) {
				t.Errorf("Stalled = %v with result %s", stalled, got.Status.Result)
			}
		})
	}
}

func TestUnavailable_Error_OnlyWhenTheServerDidNotAnswer(t *testing.T) {
	t.Parallel()
	gr := schema.GroupResource{Group: "stackwright.dev", Resource: "updates"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "ConnectionRefused", err: &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443", Err: syscall.ECONNREFUSED}, want: true},
		{name: "ServiceUnavailable", err: apierrors.NewServiceUnavailable("etcd is restarting"), want: true},
		{name: "TooManyRequests", err: apierrors.NewTooManyRequests("slow down", 1), want: true},
		{name: "Timeout", err: apierrors.NewTimeoutError("etcd", 1), want: true},
		{name: "NotFound", err: apierrors.NewNotFound(gr, "u")},
		{name: "Conflict", err: apierrors.NewConflict(gr, "u", errors.New("changed"))},
		{name: "Invalid", err: apierrors.NewBadRequest("bad")},
		{name: "OurOwnMistake", err: errors.New("failed to encode")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := unavailable(tt.err); got != tt.want {
				t.Errorf("unavailable(%v) = %v; want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestRunner_WriteOutputs_TakesOnlyTheUpdatesOwnSecret(t *testing.T) {
	t.Parallel()
	u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "u-1"}}
	name := u.Name + "-outputs"
	owned := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Update", Name: u.Name, UID: uid, Controller: ptr.To(true)}}
	}
	tests := []struct {
		name     string
		existing *corev1.Secret
		// wantErr is a substring of the error; "" means the outputs are written.
		wantErr string
	}{
		{name: "NoSecretIsCreated"},
		{name: "OwnSecretFromALostAnswerIsRewritten", existing: &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, OwnerReferences: owned(u.UID)},
			Data:       map[string][]byte{"url": []byte(`"stale"`)},
		}},
		{name: "PlantedSecretIsRefused", existing: &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Data:       map[string][]byte{"url": []byte(`"https://evil.example"`)},
		}, wantErr: "exists and was not created for Update web-1"},
		{name: "SecretOfAnotherUpdateIsRefused", existing: &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, OwnerReferences: owned("u-other")},
			Data:       map[string][]byte{"url": []byte(`"https://evil.example"`)},
		}, wantErr: "exists and was not created for Update web-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := fakeClient(t)
			if tt.existing != nil {
				b = b.WithObjects(tt.existing)
			}
			c := b.Build()
			r := &Runner{Client: c}
			_, err := r.writeOutputs(t.Context(), u, map[string]engine.Output{"url": {Value: "https://web.example"}})
			got := &corev1.Secret{}
			if gerr := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: name}, got); gerr != nil {
				t.Fatal(gerr)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("writeOutputs = %v, want an error containing %q", err, tt.wantErr)
				}
				if diff := cmp.Diff(tt.existing.Data, got.Data); diff != "" {
					t.Errorf("the existing Secret was changed (-before +after):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("writeOutputs: %v", err)
			}
			if diff := cmp.Diff(`"https://web.example"`, string(got.Data["url"])); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
		})
	}
}

// The engine request names the Stack's ESC environments as the spec does: same order,
// project-qualified names kept as written, duplicates kept (the CLI's import list keeps
// them too).
func TestRunner_Request_Environments_AsTheSpecNamesThem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		envs []string
		want []string
	}{
		{name: "none"},
		{name: "inOrder", envs: []string{"platform/aws-dev", "defaults", "team-a/overrides", "defaults"}, want: []string{"platform/aws-dev", "defaults", "team-a/overrides", "defaults"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stack := &pulumiv1.Stack{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec:       pulumiv1.StackSpec{Stack: "acme/web/dev", Backend: "https://api.pulumi.example", Environment: tt.envs},
			}
			r := &Runner{Client: fakeClient(t).WithObjects(stack).Build()}
			u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: "web-k-1", Namespace: "default"}, Spec: v1alpha1.UpdateSpec{StackName: "web", Type: v1alpha1.UpdateTypeUp}}
			_, req, err := r.Request(context.Background(), u)
			if err != nil {
				t.Fatalf("Request: %v", err)
			}
			if diff := cmp.Diff(tt.want, req.Environments); diff != "" {
				t.Errorf("Environments (-want +got):\n%s", diff)
			}
		})
	}
}

// An up claimed by a runner other than the one it was bound to first looks for its own
// run in the backend's history: the bound runner writes nothing before it starts, and may
// have applied it before its manager stopped. Nothing else does.
func TestRunner_Request_TakenOverUpLooksForItsOwnRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		op         v1alpha1.UpdateType
		bound, ran string
		recover    []string
		want       []string
	}{
		{name: "Unbound", op: v1alpha1.UpdateTypeUp, ran: "local/m/2/b"},
		{name: "RunByItsBoundRunner", op: v1alpha1.UpdateTypeUp, bound: "local/m/1/a", ran: "local/m/1/a"},
		{name: "TakenOver", op: v1alpha1.UpdateTypeUp, bound: "local/m/1/a", ran: "local/m/2/b", want: []string{"web-k-2"}},
		{name: "TakenOverRetry", op: v1alpha1.UpdateTypeUp, bound: "local/m/1/a", ran: "local/m/2/b", recover: []string{"web-k-1"}, want: []string{"web-k-1", "web-k-2"}},
		{name: "TakenOverDestroy", op: v1alpha1.UpdateTypeDestroy, bound: "local/m/1/a", ran: "local/m/2/b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: pulumiv1.StackSpec{Stack: "dev"}}
			r := &Runner{Client: fakeClient(t).WithObjects(stack).Build()}
			u := &v1alpha1.Update{
				ObjectMeta: metav1.ObjectMeta{Name: "web-k-2", Namespace: "default"},
				Spec:       v1alpha1.UpdateSpec{StackName: "web", Type: tt.op, Runner: tt.bound, Options: &v1alpha1.UpdateOptions{Recover: tt.recover}},
			}
			u.MarkRunning(tt.ran, metav1.Now())
			_, req, err := r.Request(context.Background(), u)
			if err != nil {
				t.Fatalf("Request: %v", err)
			}
			if diff := cmp.Diff(tt.want, req.Recover); diff != "" {
				t.Errorf("Recover (-want +got):\n%s", diff)
			}
		})
	}
}

// A taken-over up that found its own earlier run complete reads as a lost run recovered;
// one that recovered another Update's run reads as succeeded, and that Update is corrected.
func TestRunner_Record_OwnRunRecoveredReadsRecovered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		recovered string
		want      string
	}{
		{name: "OwnRun", recovered: "web-k-2", want: v1alpha1.ReasonRecovered},
		{name: "AnotherUpdatesRun", recovered: "web-k-1", want: v1alpha1.ReasonSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := &v1alpha1.Update{
				ObjectMeta: metav1.ObjectMeta{Name: "web-k-2", Namespace: "default"},
				Spec:       v1alpha1.UpdateSpec{StackName: "web", Type: v1alpha1.UpdateTypeUp, Runner: "local/m/1/a"},
			}
			c := fakeClient(t).WithObjects(u.DeepCopy()).WithStatusSubresource(&v1alpha1.Update{}).Build()
			r := &Runner{Client: c}
			base := u.DeepCopy()
			u.MarkRunning("local/m/2/b", metav1.Now())
			Finish(u, engine.Result{Message: "up succeeded", Recovered: &engine.Recovered{RunID: tt.recovered, Version: 3}}, nil, "", time.Now())
			if err := r.Record(context.Background(), base, u, engine.Result{}); err != nil {
				t.Fatalf("Record: %v", err)
			}
			got := &v1alpha1.Update{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(u), got); err != nil {
				t.Fatal(err)
			}
			cond := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionComplete)
			if got.Status.Result != v1alpha1.UpdateResultSucceeded || cond == nil || cond.Reason != tt.want {
				t.Errorf("Update reads %s, %+v; want succeeded, reason %s", got.Status.Result, cond, tt.want)
			}
		})
	}
}

// A successful run's outputs ride on its result's status write when none is secret and
// they are small; otherwise, and when the Update asks for it, they go to a Secret, with
// the secret ones listed. An empty set is recorded as such ({}), so that a reader tells
// "no outputs" from "not recorded".
func TestRunner_Record_OutputsInStatusUnlessSecret(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", v1alpha1.MaxOutputsInStatus)
	tests := []struct {
		name          string
		op            v1alpha1.UpdateType
		outputsSecret bool
		outputs       map[string]engine.Output
		wantStatus    map[string]string
		// wantSecret is the Secret's data, nil for no Secret.
		wantSecret map[string]string
	}{
		{name: "NoneSecret", op: v1alpha1.UpdateTypeUp, outputs: map[string]engine.Output{"url": {Value: "https://web.example"}, "port": {Value: 443}},
			wantStatus: map[string]string{"url": `"https://web.example"`, "port": "443"}},
		{name: "None", op: v1alpha1.UpdateTypeUp, wantStatus: map[string]string{}},
		{name: "OneSecret", op: v1alpha1.UpdateTypeUp, outputs: map[string]engine.Output{"url": {Value: "https://web.example"}, "token": {Value: "t0k3n", Secret: true}},
			wantSecret: map[string]string{"url": `"https://web.example"`, "token": `"t0k3n"`}},
		{name: "TooLarge", op: v1alpha1.UpdateTypeUp, outputs: map[string]engine.Output{"blob": {Value: big}},
			wantSecret: map[string]string{"blob": `"` + big + `"`}},
		{name: "SecretAskedFor", op: v1alpha1.UpdateTypeUp, outputsSecret: true, outputs: map[string]engine.Output{"url": {Value: "https://web.example"}},
			wantSecret: map[string]string{"url": `"https://web.example"`}},
		{name: "Destroy", op: v1alpha1.UpdateTypeDestroy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := &v1alpha1.Update{
				ObjectMeta: metav1.ObjectMeta{Name: "web-k-1", Namespace: "default", UID: "u-1"},
				Spec:       v1alpha1.UpdateSpec{StackName: "web", Type: tt.op, Options: &v1alpha1.UpdateOptions{OutputsSecret: tt.outputsSecret}},
			}
			c := fakeClient(t).WithObjects(u.DeepCopy()).WithStatusSubresource(&v1alpha1.Update{}).Build()
			r := &Runner{Client: c}
			base := u.DeepCopy()
			u.MarkRunning("local/m/1/a", metav1.Now())
			Finish(u, engine.Result{Message: "done"}, nil, "", time.Now())
			if err := r.Record(t.Context(), base, u, engine.Result{Outputs: tt.outputs}); err != nil {
				t.Fatalf("Record: %v", err)
			}
			got := &v1alpha1.Update{}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(u), got); err != nil {
				t.Fatal(err)
			}
			var status map[string]string
			if got.Status.Outputs != nil {
				status = map[string]string{}
				for k, v := range got.Status.Outputs {
					status[k] = string(v.Raw)
				}
			}
			if diff := cmp.Diff(tt.wantStatus, status); diff != "" {
				t.Errorf("status.outputs (-want +got):\n%s", diff)
			}
			var secret map[string]string
			if got.Status.OutputsSecretName != "" {
				sec := &corev1.Secret{}
				if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: got.Status.OutputsSecretName}, sec); err != nil {
					t.Fatal(err)
				}
				secret = map[string]string{}
				for k, v := range sec.Data {
					secret[k] = string(v)
				}
			}
			if diff := cmp.Diff(tt.wantSecret, secret); diff != "" {
				t.Errorf("outputs Secret (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeClient is a fake client builder with Stackwright's scheme.
func fakeClient(t *testing.T) *fake.ClientBuilder {
	t.Helper()
	sch, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(sch)
}
