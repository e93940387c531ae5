package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	lua "github.com/yuin/gopher-lua"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/kit"
	"github.com/stackwright/stackwright/internal/controller/stack/decide"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/inputs"
	"github.com/stackwright/stackwright/internal/source"
)

// Users watch Stacks through Argo CD's built-in health check for pulumi.com/Stack and
// through kstatus (Flux, kpt, Config Sync, cli-utils appliers). Both judge a Stack from its
// status alone, so every status the controller writes must read to them as the user would
// read it. The states below are produced by the controller's own phases and status setters;
// only the API writes and the engine runs are left out.

// argoHealthScript is Argo CD's Lua health check for pulumi.com/Stack, vendored unchanged.
const argoHealthScript = "testdata/argocd/health.lua"

// anyReason stands in where a resolver or a client-bound phase would choose the condition
// reason: neither tool may key on a reason, and reasons are being renamed to PKO's.
const anyReason = "AnyReason"

// argoHookFinalizer exempts Argo CD's sync hooks from its "Pending deletion" rule.
const argoHookFinalizer = "argocd.argoproj.io/hook-finalizer"

// Argo CD's health status codes (gitops-engine pkg/health).
const (
	argoHealthy     = "Healthy"
	argoProgressing = "Progressing"
	argoDegraded    = "Degraded"
	argoSuspended   = "Suspended"
	argoMissing     = "Missing"
	argoUnknown     = "Unknown"
)

var argoStatusCodes = []string{argoHealthy, argoProgressing, argoDegraded, argoSuspended, argoMissing, argoUnknown}

// health is what a user sees of a Stack in each tool.
type health struct {
	Argo    string
	Kstatus kstatus.Status
}

func TestStackStatus_Health_ArgoCDAndKstatus(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile(filepath.FromSlash(argoHealthScript))
	if err != nil {
		t.Fatalf("failed to read Argo CD health script: %v", err)
	}
	suspend := func(spec *pulumiv1.StackSpec) { spec.Stackwright = &pulumiv1.StackwrightSpec{Suspend: true} }
	tests := []struct {
		name  string
		setup func(h *stackSim)
		want  health
		// gap is what a user would rather see where a tool reads the status otherwise: the
		// case pins today's reading so that a change to it is deliberate.
		gap string
	}{
		{
			name:  "neverReconciled",
			setup: func(*stackSim) {},
			want:  health{Argo: argoProgressing, Kstatus: kstatus.CurrentStatus},
			gap:   "kstatus reads a Stack without conditions or observedGeneration as Current, so a waiter (Flux health checks, kpt, cli-utils appliers) may pass before the controller has looked at it",
		},
		{
			name:  "fetchingSourceOfNewStack",
			setup: func(h *stackSim) { conditions.MarkProgress(h.st, "Fetching the artifact of Program app") },
			want:  health{Argo: argoProgressing, Kstatus: kstatus.InProgressStatus},
		},
		{
			name:  "firstUpdateQueued",
			setup: func(h *stackSim) { h.reconcile() },
			want:  health{Argo: argoProgressing, Kstatus: kstatus.InProgressStatus},
		},
		{
			name:  "firstUpdateRunning",
			setup: func(h *stackSim) { h.reconcile(); h.run() },
			want:  health{Argo: argoProgressing, Kstatus: kstatus.InProgressStatus},
		},
		{
			name:  "upToDate",
			setup: func(h *stackSim) { h.deploy() },
			want:  health{Argo: argoHealthy, Kstatus: kstatus.CurrentStatus},
		},
		{
			// A resync persists its progress before fetching: it must not flap a Ready Stack.
			name: "resyncingUpToDateStack",
			setup: func(h *stackSim) {
				h.deploy()
				conditions.MarkProgress(h.st, "Fetching the artifact of Program app")
			},
			want: health{Argo: argoHealthy, Kstatus: kstatus.CurrentStatus},
		},
		{
			name:  "specChangeNotYetObserved",
			setup: func(h *stackSim) { h.deploy(); h.edit(func(spec *pulumiv1.StackSpec) { spec.Refresh = true }) },
			want:  health{Argo: argoProgressing, Kstatus: kstatus.InProgressStatus},
		},
		{
			name: "updateRunningForSpecChange",
			setup: func(h *stackSim) {
				h.deploy()
				h.edit(func(spec *pulumiv1.StackSpec) { spec.Refresh = true })
				h.reconcile()
				h.run()
			},
			want: health{Argo: argoProgressing, Kstatus: kstatus.InProgressStatus},
		},
		{
			// A referenced Secret changed: new desired state, same generation.
			name: "updateRunningForChangedInputs",
			setup: func(h *stackSim) {
				h.deploy()
				h.fingerprint = "changed"
				h.reconcile()
				h.run()
			},
			want: health{Argo: argoProgressing, Kstatus: kstatus.InProgressStatus},
		},
		{
			name:  "retryingAfterTransientFailure",
			setup: func(h *stackSim) { h.reconcile(); h.fail(v1alpha1.ReasonTransientFailure) },
			want:  health{Argo: argoProgressing, Kstatus: kstatus.InProgressStatus},
		},
		{
			name:  "retryingAfterPermanentFailureBelowLimit",
			setup: func(h *stackSim) { h.reconcile(); h.fail(v1alpha1.ReasonPermanentFailure) },
			want:  health{Argo: argoProgressing, Kstatus: kstatus.InProgressStatus},
		},
		{
			name:  "stalledAfterPermanentFailures",
			setup: func(h *stackSim) { h.failUntilStalled() },
			want:  health{Argo: argoDegraded, Kstatus: kstatus.FailedStatus},
		},
		{
			name: "stalledAfterPermanentFailuresOfSpecChange",
			setup: func(h *stackSim) {
				h.deploy()
				h.edit(func(spec *pulumiv1.StackSpec) { spec.Refresh = true })
				h.failUntilStalled()
			},
			want: health{Argo: argoDegraded, Kstatus: kstatus.FailedStatus},
		},
		{
			name: "stalledThenSpecFixedNotYetObserved",
			setup: func(h *stackSim) {
				h.failUntilStalled()
				h.edit(func(spec *pulumiv1.StackSpec) { spec.Refresh = true })
			},
			want: health{Argo: argoProgressing, Kstatus: kstatus.InProgressStatus},
		},
		{
			// A resync must not flap a Stalled Stack back to in progress.
			name: "stalledStackResynced",
			setup: func(h *stackSim) {
				h.failUntilStalled()
				h.now = h.now.Add(48 * time.Hour)
				h.reconcile()
			},
			want: health{Argo: argoDegraded, Kstatus: kstatus.FailedStatus},
		},
		{
			name: "retryRequestedOfStalledStack",
			setup: func(h *stackSim) {
				h.failUntilStalled()
				h.st.Annotations = map[string]string{pulumiv1.ReconcileRequestAnnotation: "2026-11-24T09:00:00Z"}
				h.reconcile()
			},
			want: health{Argo: argoProgressing, Kstatus: kstatus.InProgressStatus},
		},
		{
			name: "stalledOnInvalidSpec",
			setup: func(h *stackSim) {
				h.edit(func(spec *pulumiv1.StackSpec) {
					spec.Stackwright = &pulumiv1.StackwrightSpec{IdentityTokens: []pulumiv1.IdentityToken{{Audience: "sts.amazonaws.com"}}}
				})
				h.reconcile()
			},
			want: health{Argo: argoDegraded, Kstatus: kstatus.FailedStatus},
		},
		{
			name: "stalledSourceUnavailable",
			setup: func(h *stackSim) {
				h.sourceErr = fault.Stall(anyReason, "repository https://example.com/app.git has no branch main")
				h.reconcile()
			},
			want: health{Argo: argoDegraded, Kstatus: kstatus.FailedStatus},
		},
		{
			name: "waitingForSourceNotReadyYet",
			setup: func(h *stackSim) {
				h.deploy()
				h.sourceErr = fault.Retry(anyReason, "Program app has no artifact yet")
				h.reconcile()
			},
			want: health{Argo: argoProgressing, Kstatus: kstatus.InProgressStatus},
		},
		{
			name: "waitingForMissingSecret",
			setup: func(h *stackSim) {
				h.inputsErr = fault.Retry(anyReason, "Secret creds does not exist")
				h.reconcile()
			},
			want: health{Argo: argoProgressing, Kstatus: kstatus.InProgressStatus},
		},
		{
			name: "waitingForPrerequisite",
			setup: func(h *stackSim) {
				h.waitingFor = "Stack network is not Ready"
				h.reconcile()
			},
			want: health{Argo: argoProgressing, Kstatus: kstatus.InProgressStatus},
		},
		{
			name:  "suspendedBeforeFirstUpdate",
			setup: func(h *stackSim) { h.edit(suspend); h.reconcile() },
			want:  health{Argo: argoProgressing, Kstatus: kstatus.CurrentStatus},
			gap:   "Argo CD's script has no Suspended rule, so a Stack suspended before it ever deployed (no Ready condition) reads Progressing there for as long as it stays suspended; kstatus reads Current",
		},
		{
			name:  "suspendedAfterDeploying",
			setup: func(h *stackSim) { h.deploy(); h.edit(suspend); h.reconcile() },
			// Suspending is a spec change; it counts as observed once nothing is in flight,
			// so a deployed Stack stays Healthy while suspended.
			want: health{Argo: argoHealthy, Kstatus: kstatus.CurrentStatus},
		},
		{
			name:  "suspendedWhileUpdateRuns",
			setup: func(h *stackSim) { h.reconcile(); h.run(); h.edit(suspend); h.reconcile() },
			want:  health{Argo: argoProgressing, Kstatus: kstatus.InProgressStatus},
		},
		{
			name: "resumedAfterSuspend",
			// Toggling suspend changes the generation, which is part of the desired state:
			// resuming runs an update before the Stack is Ready again.
			setup: func(h *stackSim) {
				h.deploy()
				h.edit(suspend)
				h.reconcile()
				h.edit(func(spec *pulumiv1.StackSpec) { spec.Stackwright = nil })
				h.reconcile()
				h.succeed()
			},
			want: health{Argo: argoHealthy, Kstatus: kstatus.CurrentStatus},
		},
		{
			name:  "deletingDestroyQueued",
			setup: func(h *stackSim) { h.deploy(); h.delete(); h.reconcile() },
			want:  health{Argo: argoProgressing, Kstatus: kstatus.TerminatingStatus},
		},
		{
			name:  "deletingDestroyRunning",
			setup: func(h *stackSim) { h.deploy(); h.delete(); h.reconcile(); h.run() },
			want:  health{Argo: argoProgressing, Kstatus: kstatus.TerminatingStatus},
		},
		{
			name:  "deletingDestroyRetrying",
			setup: func(h *stackSim) { h.deploy(); h.delete(); h.reconcile(); h.fail(v1alpha1.ReasonTransientFailure) },
			want:  health{Argo: argoProgressing, Kstatus: kstatus.TerminatingStatus},
		},
		{
			name:  "deletingDestroyFailedStalled",
			setup: func(h *stackSim) { h.deploy(); h.delete(); h.failUntilStalled() },
			want:  health{Argo: argoProgressing, Kstatus: kstatus.TerminatingStatus},
			gap:   "a destroy that failed for good holds the finalizer until someone acts, yet Argo CD shows Progressing (Pending deletion) and kstatus Terminating: both rank deletion above every condition, so the Stalled condition is visible only in the Stack itself",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newStackSim(t)
			tt.setup(h)
			obj, err := liveObject(h.st)
			if err != nil {
				t.Fatal(err)
			}
			argo, err := argoHealth(t.Context(), string(script), obj)
			if err != nil {
				t.Fatal(err)
			}
			ks, err := kstatus.Compute(obj)
			if err != nil {
				t.Fatalf("failed to compute kstatus of Stack: %v", err)
			}
			t.Logf("Argo CD: %s %q; kstatus: %s %q", argo.Status, argo.Message, ks.Status, ks.Message)
			if tt.gap != "" {
				t.Logf("known gap: %s", tt.gap)
			}
			got := health{Argo: argo.Status, Kstatus: ks.Status}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("health mismatch (-want +got):\n%s\nconditions: %s", diff, conditionSummary(h.st))
			}
		})
	}
}

// stackSim drives a Stack through the controller's phases and status setters in the order
// Reconcile runs them. Phases that need the API server are replaced by their effect on the
// status; the Update it records stands in for the one an executor would run.
type stackSim struct {
	t   *testing.T
	r   *Reconciler
	st  *pulumiv1.Stack
	u   *v1alpha1.Update
	now time.Time

	// sourceErr and inputsErr make the source or the inputs fail to resolve.
	sourceErr, inputsErr error
	// fingerprint is the referenced ConfigMaps' and Secrets' fingerprint.
	fingerprint string
	// waitingFor names an unsatisfied prerequisite.
	waitingFor string
	// result is the last reconcile's.
	result ctrl.Result
}

func newStackSim(t *testing.T) *stackSim {
	h := &stackSim{
		t:   t,
		now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC),
		st: &pulumiv1.Stack{
			TypeMeta: metav1.TypeMeta{APIVersion: pulumiv1.GroupVersion.String(), Kind: "Stack"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "app", Namespace: "default", UID: "4c5d7c9e-0000-4000-8000-000000000001", Generation: 1,
				Finalizers: []string{pulumiv1.StackFinalizer},
			},
			Spec: pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "app"}, DestroyOnFinalize: true},
		},
	}
	h.r = &Reconciler{
		Options: Options{MaxBackoff: 24 * time.Hour, StallAfter: 3},
		Now:     func() time.Time { return h.now },
	}
	return h
}

// reconcile does to the status what one Reconcile does, ending as its deferred patch does.
func (h *stackSim) reconcile() {
	h.t.Helper()
	s := &scope{stack: h.st, op: operation(&h.st.Spec)}
	phases := []kit.Phase[*scope]{
		h.observeUpdate, h.r.checkSuspended, h.r.checkExecutor, h.resolveSource, h.resolveInputs,
		h.r.decideNext, h.awaitPrerequisites, h.startUpdate, h.r.markUpToDate,
	}
	if !h.st.DeletionTimestamp.IsZero() {
		s.op = v1alpha1.UpdateTypeDestroy
		phases = []kit.Phase[*scope]{h.observeUpdate, h.r.chooseDestroy, h.resolveInputs, h.r.decideNext, h.startUpdate, h.releaseDestroyed}
	}
	res, err := s.run(h.t.Context(), phases...)
	if err != nil {
		h.t.Fatalf("failed to reconcile Stack: %v", err)
	}
	h.result = res
	finalizeStatus(h.st, s.upToDate)
}

// edit changes the spec as a user's apply does, bumping the generation.
func (h *stackSim) edit(mutate func(*pulumiv1.StackSpec)) {
	mutate(&h.st.Spec)
	h.st.Generation++
}

// delete marks the Stack deleted as the API server does: a deletion timestamp, and a
// generation bump because the finalizer keeps the object.
func (h *stackSim) delete() {
	h.st.DeletionTimestamp = &metav1.Time{Time: h.now}
	h.st.Generation++
}

// deploy runs the first update to success.
func (h *stackSim) deploy() {
	h.t.Helper()
	h.reconcile()
	h.succeed()
	if !conditions.IsTrue(h.st, pulumiv1.ConditionReady) {
		h.t.Fatalf("failed to deploy Stack: %s", conditionSummary(h.st))
	}
}

// run has the executor pick up the recorded Update.
func (h *stackSim) run() {
	h.t.Helper()
	h.u.Status.Phase = v1alpha1.UpdatePhaseRunning
	h.reconcile()
}

// succeed has the recorded Update succeed.
func (h *stackSim) succeed() {
	h.t.Helper()
	h.finish(v1alpha1.UpdatePhaseSucceeded, v1alpha1.ReasonSucceeded)
}

// fail has the recorded Update fail with the given Complete reason.
func (h *stackSim) fail(reason string) {
	h.t.Helper()
	h.finish(v1alpha1.UpdatePhaseFailed, reason)
}

func (h *stackSim) finish(phase v1alpha1.UpdatePhase, reason string) {
	h.t.Helper()
	if h.u == nil || h.st.Status.CurrentUpdate == nil {
		h.t.Fatalf("failed to finish Update: none in flight (%s)", conditionSummary(h.st))
	}
	end := metav1.NewTime(h.now)
	h.u.Status.Phase, h.u.Status.EndTime = phase, &end
	status, result := metav1.ConditionTrue, v1alpha1.UpdateResultSucceeded
	if phase == v1alpha1.UpdatePhaseFailed {
		status, result = metav1.ConditionFalse, v1alpha1.UpdateResultFailed
		h.u.Status.Message = "error: resource app failed to create"
	}
	h.u.Status.Result = result
	h.u.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionComplete, Status: status, Reason: reason, LastTransitionTime: end}}
	h.reconcile()
}

// failUntilStalled fails updates permanently, waiting out each backoff, until the Stack
// stalls.
func (h *stackSim) failUntilStalled() {
	h.t.Helper()
	for range 2 * h.r.Options.StallAfter {
		if isStalled(h.st) {
			return
		}
		if h.st.Status.CurrentUpdate == nil {
			h.now = h.now.Add(48 * time.Hour)
			h.reconcile()
		}
		h.fail(v1alpha1.ReasonPermanentFailure)
	}
	if !isStalled(h.st) {
		h.t.Fatalf("failed to stall Stack: %s", conditionSummary(h.st))
	}
}

// observeUpdate is Reconciler.observeUpdate with the recorded Update in place of the API.
func (h *stackSim) observeUpdate(_ context.Context, _ *scope) (bool, error) {
	if h.st.Status.CurrentUpdate == nil {
		return true, nil
	}
	if !h.u.Status.Finished() {
		markUpdateInFlight(h.st, h.u, false)
		return false, nil
	}
	recordFinish(h.st, h.u, nil, h.now)
	return true, nil
}

// resolveSource is Reconciler.resolveSource with a resolver that returns sourceErr or a
// fixed artifact; its progress is persisted in the real one, so a user sees it.
func (h *stackSim) resolveSource(_ context.Context, s *scope) (bool, error) {
	conditions.MarkProgress(h.st, "Fetching "+describeSource(&h.st.Spec))
	if h.sourceErr != nil {
		return h.r.handleFault(s, h.sourceErr, true)
	}
	s.artifact = source.Artifact{Revision: "3f2a9c1", Digest: "sha256:2b7e0a5f9c3d4e1a8b6c0d2f4e6a8c0b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c"}
	markSourceReady(h.st, true, anyReason, artifactMessage(s.artifact))
	return true, nil
}

// resolveInputs is Reconciler.resolveInputs (and resolveDestroyInputs outside a terminating
// namespace) with inputs that fail with inputsErr or fingerprint as given.
func (h *stackSim) resolveInputs(_ context.Context, s *scope) (bool, error) {
	if h.inputsErr != nil {
		return h.r.handleFault(s, h.inputsErr, false)
	}
	s.inputs = &inputs.Inputs{Fingerprint: h.fingerprint}
	return true, nil
}

// awaitPrerequisites is Reconciler.awaitPrerequisites with one prerequisite that is
// unsatisfied when waitingFor says so.
func (h *stackSim) awaitPrerequisites(_ context.Context, s *scope) (bool, error) {
	if h.waitingFor == "" || s.next.Action != decide.Run || s.resume != "" || s.op == v1alpha1.UpdateTypeDestroy {
		return true, nil
	}
	markReconciling(h.st, anyReason, "waiting for prerequisites: "+h.waitingFor)
	return false, nil
}

// startUpdate is Reconciler.startUpdate's effect on the status; the Update it would create
// is kept as the one in flight.
func (h *stackSim) startUpdate(_ context.Context, s *scope) (bool, error) {
	if s.next.Action != decide.Run {
		return true, nil
	}
	u := h.r.buildUpdate(s)
	recordStart(h.st, u)
	markReconciling(h.st, inProgressReason(s.op), fmt.Sprintf("Starting %s: %s (Update %s)", s.op, s.next.Why, u.Name))
	u.Status.Phase = v1alpha1.UpdatePhasePending
	h.u = u
	return false, nil
}

// releaseDestroyed is Reconciler.releaseDestroyed's effect on the status; the Stack is gone
// once its finalizer is released, so no case reads it afterwards.
func (h *stackSim) releaseDestroyed(_ context.Context, _ *scope) (bool, error) {
	conditions.Remove(h.st, pulumiv1.ConditionReconciling)
	h.st.Finalizers = slices.DeleteFunc(h.st.Finalizers, func(f string) bool { return f == pulumiv1.StackFinalizer })
	return false, nil
}

func conditionSummary(st *pulumiv1.Stack) string {
	s := fmt.Sprintf("generation %d, observedGeneration %d:", st.Generation, st.Status.ObservedGeneration)
	for _, c := range st.Status.Conditions {
		s += fmt.Sprintf(" %s=%s(%s, gen %d)", c.Type, c.Status, c.Reason, c.ObservedGeneration)
	}
	return s
}

// liveObject is the Stack as Argo CD's cluster cache and kstatus's callers hold it: the API
// server's JSON decoded into unstructured content, where integers are int64.
func liveObject(st *pulumiv1.Stack) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal Stack: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("failed to unmarshal Stack: %w", err)
	}
	// The API server drops the status of an object being created, so a Stack no controller
	// has written to has none at all, rather than an empty one.
	if status, ok := u.Object["status"].(map[string]any); ok && len(status) == 0 {
		delete(u.Object, "status")
	}
	return u, nil
}

// argoHealthStatus is gitops-engine's health.HealthStatus.
type argoHealthStatus struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// argoHealth assesses a live Stack as Argo CD does: gitops-engine's GetResourceHealth ranks
// deletion above any health check, then argo-cd's util/lua runs the resource's health
// script with the object as the global obj and reads back the table it returns.
func argoHealth(ctx context.Context, script string, obj *unstructured.Unstructured) (argoHealthStatus, error) {
	if obj.GetDeletionTimestamp() != nil && !slices.Contains(obj.GetFinalizers(), argoHookFinalizer) {
		return argoHealthStatus{Status: argoProgressing, Message: "Pending deletion"}, nil
	}
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	// Argo CD also opens a restricted os library, which the Stack script does not use.
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return argoHealthStatus{}, fmt.Errorf("failed to open Lua library %s: %w", lib.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", luaValue(l, obj.Object))
	if err := l.DoString(script); err != nil {
		return argoHealthStatus{}, fmt.Errorf("failed to run Argo CD health script: %w", err)
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return argoHealthStatus{}, fmt.Errorf("failed to read Argo CD health: script returned %s, not a table", l.Get(-1).Type())
	}
	hs := argoHealthStatus{Status: luaString(ret.RawGetString("status")), Message: luaString(ret.RawGetString("message"))}
	if !slices.Contains(argoStatusCodes, hs.Status) {
		// Argo CD's ExecuteHealthLua turns an unknown code into Unknown.
		return argoHealthStatus{Status: argoUnknown, Message: "Lua returned an invalid health status"}, nil
	}
	return hs, nil
}

func luaString(v lua.LValue) string {
	if v == lua.LNil {
		return ""
	}
	return v.String()
}

// luaValue is argo-cd util/lua's decodeValue: maps and slices become tables (empty ones
// empty tables), integers numbers, json.Number strings, and anything else nil.
func luaValue(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case []any:
		arr := l.CreateTable(len(v), 0)
		for _, item := range v {
			arr.Append(luaValue(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for key, item := range v {
			tbl.RawSetH(lua.LString(key), luaValue(l, item))
		}
		return tbl
	}
	return lua.LNil
}
