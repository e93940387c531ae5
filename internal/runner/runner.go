package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/crashpoint"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/executor"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/inputs"
	"github.com/stackwright/stackwright/internal/metrics"
	"github.com/stackwright/stackwright/internal/policy"
)

// fieldManager identifies the runner's writes.
const fieldManager = "stackwright-runner"

// Engine is the part of *engine.Engine the runner uses.
type Engine interface {
	Run(ctx context.Context, r engine.Request) (engine.Result, error)
}

// +kubebuilder:rbac:groups=stackwright.dev,resources=updates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create

// Runner executes Updates.
type Runner struct {
	Client client.Client
	Engine Engine
	Store  *artifact.Store
	// WorkRoot holds one work directory per Stack, recreated for every run.
	WorkRoot string
	Inputs   inputs.Options
	Limits   artifact.Limits
	// Policies judges the previews that save a plan.
	Policies *policy.Evaluator
}

// Claim marks u as Running by runner, with an optimistic lock: exactly one caller wins,
// and it gets true. The others get false and must not run u.
func (r *Runner) Claim(ctx context.Context, u *v1alpha1.Update, runner string) (bool, error) {
	if u.Status.Phase != "" && u.Status.Phase != v1alpha1.UpdatePhasePending {
		return false, nil
	}
	base := u.DeepCopy()
	u.MarkRunning(runner, metav1.Now())
	err := r.Client.Status().Patch(ctx, u, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(fieldManager))
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsConflict(err):
		return false, executor.ErrStaleRead
	case err != nil:
		return false, fmt.Errorf("failed to claim Update %s: %w", u.Name, err)
	}
	return true, nil
}

// ReportRunning records that u, bound to this runner at its creation and started without a
// claim, is running; base is u as read before it started. The write is locked: an Update
// that changed meanwhile (a queue position written as it started, or another runner's
// claim) is left as it is, and the run's result says the rest.
func (r *Runner) ReportRunning(ctx context.Context, base, u *v1alpha1.Update) error {
	if err := r.Client.Status().Patch(ctx, u, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(fieldManager)); err != nil {
		return fmt.Errorf("failed to report Update %s running: %w", u.Name, err)
	}
	return nil
}

// Run executes a claimed Update and records its outcome. The returned error is about
// recording; the operation's own failure is in the Update's status.
func (r *Runner) Run(ctx context.Context, u *v1alpha1.Update) error {
	base := u.DeepCopy()
	res, err := r.Execute(ctx, u)
	if err != nil {
		res = engine.Result{}
	}
	return r.Record(ctx, base, u, res)
}

// Record stores the result of a finished run of u: its status (u's, patched over base)
// and, for a successful run that produces them, its outputs and its update plan in Secrets
// owned by u. It serves both executors: the Job executor's runner Pods hand their result to
// the manager, which records it here.
func (r *Runner) Record(ctx context.Context, base, u *v1alpha1.Update, res engine.Result) error {
	log := ctrl.LoggerFrom(ctx).WithValues("update", u.Name, "type", u.Spec.Type)
	// The run may have outlived ctx (shutdown); its result must still be recorded, and an
	// API server that is away (restarting) is waited for: a result not recorded leaves the
	// Update Running under a live runner, which nobody would ever retry.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordBudget)
	defer cancel()
	if u.Status.Phase == v1alpha1.UpdatePhaseSucceeded {
		if outputs, ok := statusOutputs(u, res.Outputs); ok {
			// No Secret for outputs the status may hold: the result's write carries them.
			u.Status.Outputs, u.Status.OutputsSecretName = outputs, ""
		} else {
			var name string
			serr := retryUnavailable(ctx, log, "write outputs Secret", func() (err error) {
				name, err = r.writeOutputs(ctx, u, res.Outputs)
				return err
			})
			if serr != nil {
				// The operation happened; losing its outputs must not make it look failed.
				log.Error(serr, "Failed to write outputs Secret")
			}
			u.Status.OutputsSecretName = name
		}
		crashpoint.Hit(crashpoint.RunnerOutputsWritten)
		if u.Spec.Options != nil && u.Spec.Options.SavePlan {
			// Without its plan, or its policies' verdict, a change cannot go on: the
			// preview fails instead, and is retried.
			if err := r.recordPlan(ctx, u, res); err != nil {
				log.Error(err, "Failed to record the preview's plan")
				msg := "the preview succeeded but " + err.Error()
				u.Status.Phase, u.Status.Result, u.Status.Message = v1alpha1.UpdatePhaseFailed, v1alpha1.UpdateResultFailed, msg
				u.MarkFinished(metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonTransientFailure, Message: msg})
			}
		}
	}
	if rec := u.Status.Recovered; rec != nil && rec.Update == u.Name && u.Status.Phase == v1alpha1.UpdatePhaseSucceeded {
		// A taken-over up found its own run, by the runner it was bound to, complete in the
		// backend's history: it is a lost run recovered, and says so as such a record does.
		u.MarkFinished(metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRecovered, Message: u.Status.Message})
	}
	// Measured before the patch: its response brings the times back at a second's
	// precision, and a run started and finished within one second would measure 0.
	var took time.Duration
	if u.Status.StartTime != nil && u.Status.EndTime != nil {
		took = u.Status.EndTime.Sub(u.Status.StartTime.Time)
	}
	if perr := retryUnavailable(ctx, log, "record result", func() error {
		return r.Client.Status().Patch(ctx, u, client.MergeFrom(base), client.FieldOwner(fieldManager))
	}); perr != nil {
		return fmt.Errorf("failed to record result of Update %s: %w", u.Name, perr)
	}
	crashpoint.Hit(crashpoint.RunnerResultRecorded)
	if rec := u.Status.Recovered; rec != nil && rec.Update != u.Name {
		if err := r.markRecovered(ctx, u, rec); err != nil {
			// The Stack has its result from u; the lost Update's record stays wrong.
			log.Error(err, "Failed to correct the record of the lost Update", "lostUpdate", rec.Update)
		}
	}
	metrics.ObserveUpdate(u.Namespace, string(u.Spec.Type), string(u.Status.Result), u.CompleteReason(), took)
	log.Info("Update finished", "phase", u.Status.Phase, "message", u.Status.Message)
	return nil
}

// recordBudget bounds how long a finished run waits for the API server to take its result.
const recordBudget = 10 * time.Minute

// retryUnavailable calls f until it succeeds, fails for a reason other than the API
// server being unreachable or overloaded, or ctx ends; waits grow from 1 s to 30 s.
func retryUnavailable(ctx context.Context, log logr.Logger, what string, f func() error) error {
	wait := time.Second
	for {
		err := f()
		if err == nil || !unavailable(err) {
			return err
		}
		log.Info("API server unavailable; trying again", "action", what, "after", wait.String(), "error", err.Error())
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// unavailable reports whether err says the API server could not be reached or could not
// answer for now, rather than anything about the request.
func unavailable(err error) bool {
	// No answer at all: connection refused or reset, a timeout, TLS, DNS (the HTTP
	// client's errors are *url.Error, a net.Error).
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err)
}

// markRecovered corrects the record of the lost Update whose completed run u found in the
// backend's history: it was marked cancelled when its runner was lost. An Update pruned
// since, or recorded otherwise, is left alone.
func (r *Runner) markRecovered(ctx context.Context, u *v1alpha1.Update, rec *v1alpha1.RecoveredRun) error {
	lost := &v1alpha1.Update{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: rec.Update}, lost); err != nil {
		return client.IgnoreNotFound(err)
	}
	if lost.Spec.StackName != u.Spec.StackName || !apimeta.IsStatusConditionPresentAndEqual(lost.Status.Conditions, v1alpha1.ConditionStalled, metav1.ConditionTrue) ||
		!v1alpha1.RunnerLostReason(apimeta.FindStatusCondition(lost.Status.Conditions, v1alpha1.ConditionStalled).Reason) {
		return nil
	}
	base := lost.DeepCopy()
	lost.MarkRecovered(u.Name, rec.Version)
	if err := r.Client.Status().Patch(ctx, lost, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(fieldManager)); err != nil {
		return fmt.Errorf("failed to record recovered run of Update %s: %w", lost.Name, err)
	}
	return nil
}

// Execute runs u and fills in its status, writing nothing to the API server. It serves
// Updates that cannot be stored (a destroy in a terminating namespace) and Run.
func (r *Runner) Execute(ctx context.Context, u *v1alpha1.Update) (engine.Result, error) {
	tail := engine.NewTail(v1alpha1.MaxLogTailLength)
	res, err := r.run(ctx, u, tail)
	Finish(u, res, err, tail.String(), time.Now())
	return res, err
}

func (r *Runner) run(ctx context.Context, u *v1alpha1.Update, tail *engine.Tail) (engine.Result, error) {
	stack, req, err := r.Request(ctx, u)
	if err != nil {
		return engine.Result{}, err
	}
	if len(stack.Spec.IdentityTokens()) > 0 {
		// The Stack controller does not start such runs here; an Update created before the
		// manager switched executors still must not run without its tokens.
		return engine.Result{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.stackwright.identityTokens needs the job executor: the engine would run in the manager, without the tokens")
	}
	dir, err := r.prepare(u, stack)
	if err != nil {
		return engine.Result{}, err
	}
	crashpoint.Hit(crashpoint.RunnerArtifactExtracted)
	if err := EnsureFileBackend(req.Env[inputs.EnvBackendURL]); err != nil {
		return engine.Result{}, err
	}
	req.WorkDir, req.Log = dir, tail
	// The engine runs in this process, which runs one operation per stack at a time: a lock
	// left by a pulumi of this host that no longer runs is one a crash of ours left.
	req.StaleLocalLocks = true
	return r.Engine.Run(ctx, req)
}

// Request resolves what an engine run of u needs, except its work directory and log: the
// operation, and the Stack's inputs (config, secrets, environment) read with the manager's
// rights. The Job executor hands it to a runner Pod, which has none.
func (r *Runner) Request(ctx context.Context, u *v1alpha1.Update) (*pulumiv1.Stack, engine.Request, error) {
	stack := &pulumiv1.Stack{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: u.Spec.StackName}, stack); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, engine.Request{}, fault.Stall(v1alpha1.ReasonPermanentFailure, "Stack %q not found", u.Spec.StackName)
		}
		return nil, engine.Request{}, fmt.Errorf("failed to get Stack %s: %w", u.Spec.StackName, err)
	}
	in, err := inputs.Resolve(ctx, r.Client, stack, r.Inputs)
	if err != nil {
		return nil, engine.Request{}, err
	}
	if err := checkInputs(u, stack, in); err != nil {
		return nil, engine.Request{}, err
	}
	req := engine.Request{
		Operation:       engine.Operation(u.Spec.Type),
		Stack:           stack.Spec.Stack,
		SecretsProvider: stack.Spec.SecretsProvider,
		Config:          make(map[string]engine.ConfigValue, len(in.Config)),
		Environments:    slices.Clone(stack.Spec.Environment),
		Env:             in.Env,
		CreateStack:     !stack.Spec.UseLocalStackOnly,
		StackExists:     StackExists(stack),
		RunID:           u.Name,
	}
	for k, v := range in.Config {
		req.Config[k] = engine.ConfigValue(v)
	}
	if o := u.Spec.Options; o != nil {
		req.Refresh, req.ExpectNoChanges, req.Targets, req.TargetDependents = o.Refresh, o.ExpectNoChanges, o.Targets, o.TargetDependents
		req.RemoveStack, req.Message, req.RunProgram = o.Remove, o.Message, o.RunProgram
		req.Replace, req.Parallel, req.ContinueOnError = o.Replace, o.Parallel, o.ContinueOnError
		if u.Spec.Type == v1alpha1.UpdateTypeUp {
			req.Recover = slices.Clone(o.Recover)
		}
		req.SavePlan = o.SavePlan && u.Spec.Type == v1alpha1.UpdateTypePreview
		if o.Plan != "" {
			if req.Plan, err = r.readPlan(ctx, u); err != nil {
				return nil, engine.Request{}, err
			}
		}
	}
	if u.Spec.Type == v1alpha1.UpdateTypeUp && u.TakenOver() {
		// The runner it was bound to writes nothing before it starts: it may have applied
		// this very up before its manager stopped, and the backend's history would say so.
		req.Recover = append(req.Recover, u.Name)
	}
	return stack, req, nil
}

// checkInputs refuses to run an up or preview on inputs other than those its Stack decided
// it on: its desired-state key would then name values that were never deployed under it
// (a Secret edited while the Update waited for a slot). The failure is transient and runs
// no engine; the Stack decides again, on the inputs as they are. A destroy removes what
// the stack holds whatever its inputs, and the namespace's deletion, which marks every
// input deleted, must not hold it up.
func checkInputs(u *v1alpha1.Update, stack *pulumiv1.Stack, in *inputs.Inputs) error {
	want := u.Spec.Inputs
	if want == nil || (u.Spec.Type != v1alpha1.UpdateTypeUp && u.Spec.Type != v1alpha1.UpdateTypePreview) {
		return nil
	}
	switch {
	case stack.Generation != want.StackGeneration:
		return fault.Retry(v1alpha1.ReasonTransientFailure, "the Stack's spec changed (generation %d, decided on %d) before this %s ran: the Stack decides again on the new spec", stack.Generation, want.StackGeneration, u.Spec.Type)
	case in.Fingerprint != want.Fingerprint:
		return fault.Retry(v1alpha1.ReasonTransientFailure, "a ConfigMap or Secret the Stack references changed before this %s ran: the Stack decides again on the new values", u.Spec.Type)
	}
	return nil
}

// readPlan reads the plan that u is held to: the one its preview saved, if that preview is
// of the same Stack and program, succeeded, and still has it.
func (r *Runner) readPlan(ctx context.Context, u *v1alpha1.Update) ([]byte, error) {
	name := u.Spec.Options.Plan
	p := &v1alpha1.Update{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fault.Retry(v1alpha1.ReasonPlanInvalid, "the preview Update %s whose plan this update is held to is gone", name)
		}
		return nil, fmt.Errorf("failed to get preview Update %s: %w", name, err)
	}
	switch {
	case p.Spec.StackName != u.Spec.StackName || p.Spec.Type != v1alpha1.UpdateTypePreview ||
		p.Spec.ArtifactDigest != u.Spec.ArtifactDigest || p.Spec.ProjectDir != u.Spec.ProjectDir:
		return nil, fault.Stall(v1alpha1.ReasonPermanentFailure, "Update %s is not a preview of Stack %s's program at %s", name, u.Spec.StackName, u.Spec.Revision)
	case p.Status.Phase != v1alpha1.UpdatePhaseSucceeded || p.Status.PlanSecretName == "":
		return nil, fault.Retry(v1alpha1.ReasonPlanInvalid, "preview Update %s saved no plan", name)
	}
	sec := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: p.Status.PlanSecretName}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fault.Retry(v1alpha1.ReasonPlanInvalid, "the plan of preview Update %s (Secret %s) is gone", name, p.Status.PlanSecretName)
		}
		return nil, fmt.Errorf("failed to get plan Secret %s: %w", p.Status.PlanSecretName, err)
	}
	if !metav1.IsControlledBy(sec, p) || len(sec.Data[v1alpha1.PlanSecretKey]) == 0 {
		return nil, fault.Retry(v1alpha1.ReasonPlanInvalid, "Secret %s holds no plan of preview Update %s", sec.Name, name)
	}
	return sec.Data[v1alpha1.PlanSecretKey], nil
}

// recordPlan stores the plan a preview saved and judges its steps with the policies that
// select its Stack.
func (r *Runner) recordPlan(ctx context.Context, u *v1alpha1.Update, res engine.Result) error {
	if len(res.Plan) == 0 {
		return errors.New("it saved no plan")
	}
	name, err := r.writePlan(ctx, u, res.Plan)
	if err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.RunnerPlanWritten)
	u.Status.PlanSecretName = name
	stack := &pulumiv1.Stack{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: u.Spec.StackName}, stack); err != nil {
		return fmt.Errorf("failed to get Stack %s: %w", u.Spec.StackName, err)
	}
	sources, err := policy.Select(ctx, r.Client, stack)
	if err != nil || len(sources) == 0 {
		return err
	}
	in := policy.Input{
		Stack: policy.Stack{Name: stack.Name, Namespace: stack.Namespace, Labels: stack.Labels, Annotations: stack.Annotations, Revision: u.Spec.Revision},
		Steps: res.Steps, Changes: u.Status.Changes,
	}
	u.Status.Policy = r.Policies.Evaluate(ctx, sources, in)
	if n := len(u.Status.Policy.Violations) + len(u.Status.Policy.Errors); n > 0 {
		u.Status.Message += fmt.Sprintf("; %d policy violation(s)", n)
	}
	return nil
}

// maxPlanSize leaves room, under the API server's 1 MiB object limit, for the Secret's
// metadata.
const maxPlanSize = 1<<20 - 16<<10

// writePlan stores a preview's update plan in a Secret owned by the preview.
func (r *Runner) writePlan(ctx context.Context, u *v1alpha1.Update, plan []byte) (string, error) {
	if len(plan) > maxPlanSize {
		return "", fmt.Errorf("the plan has %d bytes, more than a Secret holds (%d)", len(plan), maxPlanSize)
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: u.Name + v1alpha1.PlanSecretSuffix, Namespace: u.Namespace, Labels: u.Labels},
		Data:       map[string][]byte{v1alpha1.PlanSecretKey: plan},
	}
	if err := controllerutil.SetControllerReference(u, sec, r.Client.Scheme()); err != nil {
		return "", fmt.Errorf("failed to set owner of plan Secret: %w", err)
	}
	if err := r.createOwned(ctx, u, sec, "plan"); err != nil {
		return "", err
	}
	return sec.Name, nil
}

// createOwned creates sec, controlled by u. One that exists already is taken only if u
// controls it (a retry after the first answer was lost), and then gets sec's content: a
// Secret of that name a tenant made beforehand would otherwise pass for u's outputs or plan.
func (r *Runner) createOwned(ctx context.Context, u *v1alpha1.Update, sec *corev1.Secret, what string) error {
	err := r.Client.Create(ctx, sec, client.FieldOwner(fieldManager))
	switch {
	case err == nil:
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("failed to create %s Secret %s: %w", what, sec.Name, err)
	}
	existing := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(sec), existing); err != nil {
		return fmt.Errorf("failed to get %s Secret %s: %w", what, sec.Name, err)
	}
	if !metav1.IsControlledBy(existing, u) {
		return fmt.Errorf("failed to create %s Secret %s: a Secret of that name exists and was not created for Update %s", what, sec.Name, u.Name)
	}
	existing.Data, existing.Annotations = sec.Data, sec.Annotations
	if err := r.Client.Update(ctx, existing, client.FieldOwner(fieldManager)); err != nil {
		return fmt.Errorf("failed to update %s Secret %s: %w", what, sec.Name, err)
	}
	return nil
}

// StackExists is whether the Stack's stack is known to exist in its backend: an
// operation on it has succeeded. It is a hint that saves the engine creating the stack
// (a CLI process) before every run; a wrong hint costs that process later, not a failure.
func StackExists(stack *pulumiv1.Stack) bool {
	last := stack.Status.LastUpdate
	return last != nil && last.LastSuccessfulCommit != ""
}

// prepare extracts the Update's artifact, verifying its digest, into a fresh work directory
// and returns the project directory inside it.
func (r *Runner) prepare(u *v1alpha1.Update, stack *pulumiv1.Stack) (string, error) {
	work := filepath.Join(r.WorkRoot, u.Namespace, string(stack.UID))
	if err := os.RemoveAll(work); err != nil {
		return "", fmt.Errorf("failed to clear work directory %s: %w", work, err)
	}
	if u.Spec.ArtifactDigest == "" {
		return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "the program of revision %s is baked into the Stack's workspace image, which only a runner Pod (the Job executor) can run", u.Spec.Revision)
	}
	if err := r.Store.Extract(u.Spec.ArtifactDigest, work, r.Limits); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fault.Retry(pulumiv1.ReasonSourceUnavailable, "artifact %s is not in the store (the source will be fetched again)", u.Spec.ArtifactDigest)
		}
		return "", fmt.Errorf("failed to extract artifact %s: %w", u.Spec.ArtifactDigest, err)
	}
	return ProjectDir(work, u.Spec.ProjectDir, u.Spec.Revision)
}

// ProjectDir returns the project directory projectDir of an artifact extracted into work,
// refusing one that leaves it or holds no Pulumi.yaml.
func ProjectDir(work, projectDir, revision string) (string, error) {
	dir := filepath.Join(work, filepath.FromSlash(projectDir))
	if rel, err := filepath.Rel(work, dir); err != nil || strings.HasPrefix(rel, "..") {
		return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "project directory %q leaves the artifact", projectDir)
	}
	if _, err := os.Stat(filepath.Join(dir, "Pulumi.yaml")); err != nil {
		if _, yerr := os.Stat(filepath.Join(dir, "Pulumi.yml")); yerr != nil {
			return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "no Pulumi.yaml in directory %q of revision %s", projectDir, revision)
		}
	}
	return dir, nil
}

// EnsureFileBackend creates the directory of a file:// backend: pulumi refuses to log in
// to one that does not exist, and the default backend has a directory per namespace.
func EnsureFileBackend(url string) error {
	path, ok := strings.CutPrefix(url, "file://")
	if !ok || path == "" || strings.HasPrefix(path, "~") {
		return nil
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return fmt.Errorf("failed to create backend directory %s: %w", path, err)
	}
	return nil
}

// Finish fills u's status from the outcome of its run.
func Finish(u *v1alpha1.Update, res engine.Result, err error, logTail string, now time.Time) {
	end := metav1.NewTime(now)
	u.Status.EndTime = &end
	u.Status.LogTail = logTail
	u.Status.Permalink = res.Permalink
	if len(res.Changes) > 0 {
		u.Status.Changes = make(map[string]int64, len(res.Changes))
		for k, v := range res.Changes {
			u.Status.Changes[k] = int64(v)
		}
	}
	u.Status.PendingOperations = nil
	if n := len(res.PendingOperations); n > 0 && err == nil {
		u.Status.PendingOperations = res.PendingOperations[:min(n, v1alpha1.MaxPendingOperations)]
		res.Message += fmt.Sprintf("; warning: %d pending operation(s) left in the state by an interrupted update (see status.pendingOperations): check them at the provider, then clear or import them", n)
	}
	if n := len(res.HealedLocks); n > 0 && err == nil {
		res.Message += fmt.Sprintf("; removed %d stale lock(s) held by run(s) that are gone: %s", n, strings.Join(res.HealedLocks, ", "))
	}
	u.Status.Recovered = nil
	if rec := res.Recovered; rec != nil && err == nil {
		u.Status.Recovered = &v1alpha1.RecoveredRun{Update: rec.RunID, Version: rec.Version}
	}
	u.Status.Steps, u.Status.StepsOmitted = nil, 0
	for i, st := range res.Steps {
		if i == v1alpha1.MaxSteps {
			u.Status.StepsOmitted = int32(len(res.Steps) - i)
			break
		}
		u.Status.Steps = append(u.Status.Steps, v1alpha1.UpdateStep{Op: st.Op, URN: st.URN, Type: st.Type, Changed: st.Changed, Replacing: st.Replacing})
	}
	var cond metav1.Condition
	if err == nil {
		u.Status.Phase, u.Status.Result, u.Status.Message = v1alpha1.UpdatePhaseSucceeded, v1alpha1.UpdateResultSucceeded, res.Message
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, v1alpha1.ReasonSucceeded, res.Message
	} else {
		reason, result, msg := failure(err)
		u.Status.Phase, u.Status.Result, u.Status.Message = v1alpha1.UpdatePhaseFailed, result, msg
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reason, msg
	}
	u.MarkFinished(cond)
}

// failure maps an error from a run to the Complete condition's reason, the result and a
// secret-free message.
func failure(err error) (reason string, result v1alpha1.UpdateResult, msg string) {
	if f, ok := fault.As(err); ok {
		reason = v1alpha1.ReasonTransientFailure
		switch {
		case f.Reason == v1alpha1.ReasonPlanInvalid, f.Reason == v1alpha1.ReasonMissingPlugin, f.Reason == v1alpha1.ReasonOOMKilled:
			reason = f.Reason
		case f.Stalled:
			reason = v1alpha1.ReasonPermanentFailure
		}
		return reason, v1alpha1.UpdateResultFailed, f.Error()
	}
	msg = engine.Message(err)
	switch engine.Classify(err) {
	case engine.ClassPlanInvalid:
		return v1alpha1.ReasonPlanInvalid, v1alpha1.UpdateResultFailed, msg
	case engine.ClassMissingPlugin:
		return v1alpha1.ReasonMissingPlugin, v1alpha1.UpdateResultFailed, msg
	case engine.ClassBackendUnsupported:
		return v1alpha1.ReasonBackendUnsupported, v1alpha1.UpdateResultFailed, msg
	case engine.ClassCancelled:
		return v1alpha1.ReasonCancelled, v1alpha1.UpdateResultCancelled, msg
	case engine.ClassConflict:
		return v1alpha1.ReasonUpdateConflict, v1alpha1.UpdateResultFailed, msg
	case engine.ClassTransient:
		return v1alpha1.ReasonTransientFailure, v1alpha1.UpdateResultFailed, msg
	}
	return v1alpha1.ReasonPermanentFailure, v1alpha1.UpdateResultFailed, msg
}

// OOMKilled is the failure of a run during which the kernel's OOM killer killed kills
// processes of the runner's memory cgroup, whose limit is limit bytes (0: none of its
// own). The victim is the process that allocated the most (a provider plugin, the
// language host): the engine's error (a provider that stopped answering, a broken pipe)
// is what the kill caused, so the Update says OOMKilled and names the limit, and the
// engine's message follows. The runner Pod's container is the memory cgroup: a runner
// runs one operation, so every kill in it during the run is the run's.
func OOMKilled(err error, kills uint64, limit int64) error {
	_, _, msg := failure(err)
	victims := "a process"
	if kills > 1 {
		victims = fmt.Sprintf("%d processes", kills)
	}
	bound := "the runner has no memory limit of its own, so its Pod's or its node's memory ran out"
	if limit > 0 {
		bound = "the runner's memory limit is " + memoryText(limit)
	}
	return &fault.Error{Reason: v1alpha1.ReasonOOMKilled, Err: fmt.Errorf("out of memory: the kernel killed %s of the runner (%s); the engine then failed: %s", victims, bound, msg)}
}

// memoryText writes n bytes as a Pod's limit would be written (256Mi, 2Gi) when it is whole
// mebibytes; the kernel rounds a limit such as 300M down to whole pages, which only bytes
// say exactly.
func memoryText(n int64) string {
	if n%(1<<20) == 0 {
		return resource.NewQuantity(n, resource.BinarySI).String()
	}
	return fmt.Sprintf("%d bytes (%.1fMi)", n, float64(n)/(1<<20))
}

// statusOutputs returns the outputs of u's successful run as its status.outputs, and
// false when they go to a Secret instead: one of them is secret (a secret value is never
// written to any status), their JSON is over MaxOutputsInStatus bytes, or the Update asks
// for a Secret (options.outputsSecret). A destroy has none to record either way.
func statusOutputs(u *v1alpha1.Update, outputs map[string]engine.Output) (map[string]apiextensionsv1.JSON, bool) {
	if u.Spec.Type == v1alpha1.UpdateTypeDestroy || (u.Spec.Options != nil && u.Spec.Options.OutputsSecret) {
		return nil, false
	}
	out := make(map[string]apiextensionsv1.JSON, len(outputs))
	size := 0
	for k, o := range outputs {
		if o.Secret {
			return nil, false
		}
		b, err := json.Marshal(o.Value)
		if err != nil {
			return nil, false
		}
		size += len(k) + len(b)
		if size > v1alpha1.MaxOutputsInStatus {
			return nil, false
		}
		out[k] = apiextensionsv1.JSON{Raw: b}
	}
	return out, true
}

// writeOutputs stores the outputs in a Secret owned by the Update: every value as JSON,
// with the secret ones listed in an annotation so readers can mask them.
func (r *Runner) writeOutputs(ctx context.Context, u *v1alpha1.Update, outputs map[string]engine.Output) (string, error) {
	if u.Spec.Type == v1alpha1.UpdateTypeDestroy {
		return "", nil
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: u.Name + v1alpha1.OutputsSecretSuffix, Namespace: u.Namespace,
		Labels: u.Labels,
	}}
	var secret []string
	sec.Data = make(map[string][]byte, len(outputs))
	for k, o := range outputs {
		b, err := json.Marshal(o.Value)
		if err != nil {
			return "", fmt.Errorf("failed to encode output %q: %w", k, err)
		}
		sec.Data[k] = b
		if o.Secret {
			secret = append(secret, k)
		}
	}
	sort.Strings(secret)
	sec.Annotations = map[string]string{v1alpha1.SecretOutputsAnnotation: strings.Join(secret, ",")}
	if err := controllerutil.SetControllerReference(u, sec, r.Client.Scheme()); err != nil {
		return "", fmt.Errorf("failed to set owner of outputs Secret: %w", err)
	}
	if err := r.createOwned(ctx, u, sec, "outputs"); err != nil {
		return "", err
	}
	return sec.Name, nil
}
