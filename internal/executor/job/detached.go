package job

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/executor"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/inputs"
	"github.com/stackwright/stackwright/internal/runner"
)

// Detached runs. A Stack deleted with its namespace needs its destroy run, yet the API
// server refuses every new object in a terminating namespace: neither its Update nor a
// runner Job can be created there. The Update then lives in this executor's memory only,
// and its runner Job in the manager's own namespace, as DetachedServiceAccount: a
// ServiceAccount with no rights, whose API token is not mounted. The runner authenticates
// to the runner API with its projected token as any other; what it may fetch and report is
// checked against the detached Update whose Job it is.
const (
	// LabelDetached marks the runner Jobs (and their Pods and work Secrets) of detached
	// Updates.
	LabelDetached = "stackwright.dev/detached"
	// annotationDetachedUpdate holds a detached runner Job's Update, without its status, as
	// JSON: a restarted manager adopts the Job from it. An Update holds no secret.
	annotationDetachedUpdate = "stackwright.dev/detached-update"
	// adoptWait bounds how long the Stack controller's calls wait for the executor to
	// adopt the detached runners a previous manager left.
	adoptWait = 10 * time.Second
	// detachedKeep is how long a finished detached Update waits for its Stack to read it.
	detachedKeep = time.Hour
)

// detachedRun is a detached Update and the UID of its Job, once created.
type detachedRun struct {
	u   *v1alpha1.Update
	job types.UID
	// pinned is the run as it was decided: the Stack and its inputs read when its
	// namespace's deletion made the destroy detached (or why they could not be). The Job
	// is built from them whenever a slot frees, so nothing the tenant changes meanwhile
	// reaches the manager's namespace.
	pinned *pinnedRun
}

type pinnedRun struct {
	stack *pulumiv1.Stack
	req   engine.Request
	err   error
}

var _ executor.Detacher = (*Executor)(nil)

// Detaches reports whether the executor runs detached Updates: it needs the manager's
// namespace and the ServiceAccount their runners run as.
func (e *Executor) Detaches() bool {
	return e.opts.Namespace != "" && e.opts.DetachedServiceAccount != ""
}

// RunDetached implements executor.Detacher. The Update gets a UID of its own making: its
// runner's labels and report are matched against it. Its Stack and inputs are read now,
// with the decision, and pinned (detachedRun.pinned).
func (e *Executor) RunDetached(ctx context.Context, u *v1alpha1.Update) {
	e.waitAdopted()
	key := client.ObjectKeyFromObject(u)
	e.mu.Lock()
	_, ok := e.detached[key]
	e.mu.Unlock()
	if ok {
		return
	}
	u = u.DeepCopy()
	u.UID = uuid.NewUUID()
	pin := &pinnedRun{}
	pin.stack, pin.req, pin.err = e.runner.Request(ctx, u)
	e.mu.Lock()
	if _, ok := e.detached[key]; ok {
		e.mu.Unlock()
		return
	}
	e.detached[key] = &detachedRun{u: u, pinned: pin}
	e.mu.Unlock()
	e.queue.Push(executor.Item[struct{}]{Key: key})
}

// Detached implements executor.Detacher.
func (e *Executor) Detached(namespace, name string) (*v1alpha1.Update, bool) {
	e.waitAdopted()
	key := types.NamespacedName{Namespace: namespace, Name: name}
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.detached[key]
	if !ok {
		return nil, false
	}
	if d.u.Status.Finished() {
		delete(e.detached, key)
	}
	return d.u.DeepCopy(), true
}

// waitAdopted holds a caller until the runners of a previous manager are adopted, so that
// a Stack is not told its detached Update vanished while its runner still runs.
func (e *Executor) waitAdopted() {
	select {
	case <-e.adopted:
	case <-time.After(adoptWait):
	}
}

// detachedRunOf returns a copy of the detached Update under key, and its Job's UID.
func (e *Executor) detachedRunOf(key types.NamespacedName) (*v1alpha1.Update, types.UID, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.detached[key]
	if !ok {
		return nil, "", false
	}
	return d.u.DeepCopy(), d.job, true
}

// detachedOfJob returns a copy of the detached Update that Job j runs.
func (e *Executor) detachedOfJob(j *batchv1.Job) (*v1alpha1.Update, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range e.detached {
		if d.job != "" && d.job == j.UID && detachedJobName(d.u) == j.Name {
			return d.u.DeepCopy(), true
		}
	}
	return nil, false
}

// detachedJobName is the name of a detached Update's Job. Tenants' Updates meet in the
// manager's namespace, and a rerun after a restart has the same name: the hashed suffix
// covers the namespace and the UID.
func detachedJobName(u *v1alpha1.Update) string {
	return JobName("destroy-" + u.Namespace + "-" + u.Name + "-" + string(u.UID))
}

func (e *Executor) detachedIdentity(u *v1alpha1.Update) string {
	return "job/" + e.opts.Namespace + "/" + detachedJobName(u)
}

// startDetached creates the runner Job of a detached Update, or fails the Update saying
// why it cannot run.
func (e *Executor) startDetached(ctx context.Context, key types.NamespacedName) error {
	e.mu.Lock()
	d, ok := e.detached[key]
	if !ok || d.u.Status.Phase != "" {
		e.mu.Unlock()
		e.release(key)
		return nil
	}
	d.u.MarkRunning(e.detachedIdentity(d.u), metav1.NewTime(e.now()))
	u, pin := d.u.DeepCopy(), d.pinned
	d.pinned = nil // handed to the Job; the inputs need not stay in memory
	e.mu.Unlock()
	j, err := e.createDetachedJob(ctx, u, pin)
	if err != nil {
		runner.Finish(u, engine.Result{}, err, "", e.now())
		e.finishDetached(ctx, u)
		return err
	}
	e.mu.Lock()
	d.job = j.UID
	e.mu.Unlock()
	ctrl.LoggerFrom(ctx).Info("Started detached runner Job", "job", j.Name, "namespace", j.Namespace)
	return nil
}

func (e *Executor) createDetachedJob(ctx context.Context, u *v1alpha1.Update, pin *pinnedRun) (*batchv1.Job, error) {
	if pin == nil {
		return nil, fmt.Errorf("failed to start detached Update %s: its inputs were not read when it was decided", u.Name)
	}
	if pin.err != nil {
		return nil, pin.err
	}
	stack, req := pin.stack, pin.req
	var err error
	tmpl, err := parseWorkspaceTemplate(stack.Spec.WorkspaceTemplate, e.opts.Pod.Allowed)
	if err != nil {
		return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "%v", err)
	}
	// Runners of the Stack that the namespace's deletion killed left their locks.
	if req.StaleLockHosts, err = e.goneRunners(ctx, u); err != nil {
		return nil, err
	}
	record, err := json.Marshal(&v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: u.Namespace, Name: u.Name, UID: u.UID, Labels: u.Labels},
		Spec:       u.Spec,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to encode Update %s: %w", u.Name, err)
	}
	at := placement{
		namespace: e.opts.Namespace, name: detachedJobName(u), serviceAccount: e.opts.DetachedServiceAccount,
		labels: map[string]string{LabelDetached: "true"}, annotations: map[string]string{annotationDetachedUpdate: string(record)},
	}
	req.Env, stack = containDetached(req.Env, stack)
	j, secret, err := buildJob(u, stack, e.newWork(u, req), e.cert, e.opts.Pod, e.detachedOverlay(tmpl), at)
	if err != nil {
		return nil, err
	}
	if err := e.client.Create(ctx, secret, client.FieldOwner(fieldManager)); err != nil {
		return nil, e.createFault(ctx, u, err, "work Secret", secret.Name)
	}
	if err := e.client.Create(ctx, j, client.FieldOwner(fieldManager)); err != nil {
		e.deleteDetachedWork(ctx, u)
		return nil, e.createFault(ctx, u, err, "runner Job", j.Name)
	}
	// The Job owns its work Secret, so that the Secret goes with it (its TTL) should no
	// manager live to delete it when the run is over.
	secret.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}
	if err := e.client.Update(ctx, secret, client.FieldOwner(fieldManager)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to make runner Job own its work Secret", "secret", secret.Name)
	}
	return j, nil
}

// detachedOverlay keeps what of a Stack's workspaceTemplate a runner in the manager's
// namespace may use: nothing, unless the platform lets detached runs use the Stack's own
// image (DetachedTenantImages), and then that image and its pull policy. Everything else
// would be resolved among the manager's objects (a ServiceAccount, Secrets and ConfigMaps
// by name, volumes), place the Pod by the tenant's choice (node selector, tolerations),
// size it past the platform's limits (resources) or steer its engine (environment): the
// tenant chose it for a Pod of its own namespace, under its quota and network policy.
func (e *Executor) detachedOverlay(t *workspaceOverlay) *workspaceOverlay {
	if t == nil || !e.opts.DetachedTenantImages || t.Image == "" {
		return nil
	}
	return &workspaceOverlay{Image: t.Image, ImagePullPolicy: t.ImagePullPolicy}
}

// containDetached is what a detached run takes of the Stack as it is when its slot
// frees: its environment without the variables that steer the engine rather than the
// program (inputs.ReservedEnv: PATH could point into the extracted artifact), and the
// Stack without identity tokens, which would be issued to the manager namespace's
// ServiceAccount (the destroy was decided without them: delete.go releases a Stack that
// needs them).
func containDetached(env map[string]string, stack *pulumiv1.Stack) (map[string]string, *pulumiv1.Stack) {
	kept := make(map[string]string, len(env))
	for k, v := range env {
		if !inputs.Reserved(k) {
			kept[k] = v
		}
	}
	if len(stack.Spec.IdentityTokens()) > 0 {
		stack = stack.DeepCopy()
		stack.Spec.Stackwright.IdentityTokens = nil
	}
	return kept, stack
}

// finishDetached records the end of a detached Update, deletes its work Secret and frees
// its slot.
func (e *Executor) finishDetached(ctx context.Context, u *v1alpha1.Update) {
	key := client.ObjectKeyFromObject(u)
	e.mu.Lock()
	// The first end recorded stands: a report that arrives while the sweep declares the
	// runner lost must not turn one into the other.
	if d, ok := e.detached[key]; ok && d.u.UID == u.UID && !d.u.Status.Finished() {
		d.u = u.DeepCopy()
	}
	e.mu.Unlock()
	e.deleteDetachedWork(ctx, u)
	e.release(key)
}

// forgetFinished drops the detached Updates that ended longer than detachedKeep ago and
// that no Stack came to read (its finalizer was removed by hand meanwhile).
func (e *Executor) forgetFinished() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for key, d := range e.detached {
		if end := d.u.Status.EndTime; end != nil && e.now().Sub(end.Time) > detachedKeep {
			delete(e.detached, key)
		}
	}
}

// isDetached reports whether u is a detached Update of this executor.
func (e *Executor) isDetached(u *v1alpha1.Update) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.detached[client.ObjectKeyFromObject(u)]
	return ok && d.u.UID == u.UID
}

// deleteDetachedWork deletes the work Secret of a detached Update: it holds the Stack's
// secrets, in the manager's namespace.
func (e *Executor) deleteDetachedWork(ctx context.Context, u *v1alpha1.Update) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.opts.Namespace, Name: detachedJobName(u) + "-work"}}
	if err := e.client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to delete work Secret", "secret", s.Name, "namespace", s.Namespace)
	}
}

// checkDetached is Check for a detached Update: its Job is read from the API server
// (the manager's namespace may be outside the cache), and its end is recorded in memory.
func (e *Executor) checkDetached(ctx context.Context, key types.NamespacedName) {
	u, jobUID, ok := e.detachedRunOf(key)
	if !ok {
		e.release(key)
		return
	}
	if u.Status.Phase != v1alpha1.UpdatePhaseRunning || jobUID == "" ||
		(u.Status.StartTime != nil && e.now().Sub(u.Status.StartTime.Time) < e.opts.LostGrace) {
		return
	}
	j := &batchv1.Job{}
	var v executor.Verdict
	switch err := e.reader.Get(ctx, client.ObjectKey{Namespace: e.opts.Namespace, Name: detachedJobName(u)}, j); {
	case apierrors.IsNotFound(err) || (err == nil && j.UID != jobUID):
		v = executor.Verdict{Lost: "its runner Job was deleted before it reported a result"}
	case err != nil:
		return
	default:
		v = e.judgeJob(ctx, u, j)
	}
	if v.Apply(u, metav1.NewTime(e.now())) {
		ctrl.LoggerFrom(ctx).Info("Detached runner ended without its result", "update", u.Name, "message", u.Status.Message)
		e.finishDetached(ctx, u)
	}
}

// adoptDetached takes over the detached runners a previous manager started: their
// Updates, kept only in its memory, are rebuilt from their Jobs, so that their results
// are recorded and their Stacks do not start them again. What finished unrecorded is
// started again by its Stack; its work Secret goes now.
func (e *Executor) adoptDetached(ctx context.Context) error {
	if !e.Detaches() {
		return nil
	}
	var jobs batchv1.JobList
	if err := e.reader.List(ctx, &jobs, client.InNamespace(e.opts.Namespace), client.MatchingLabels{LabelDetached: "true", v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}); err != nil {
		return fmt.Errorf("failed to list detached runner Jobs: %w", err)
	}
	log := ctrl.LoggerFrom(ctx)
	for i := range jobs.Items {
		j := &jobs.Items[i]
		u := &v1alpha1.Update{}
		if err := json.Unmarshal([]byte(j.Annotations[annotationDetachedUpdate]), u); err != nil || u.UID == "" || detachedJobName(u) != j.Name {
			log.Info("Ignored a detached runner Job whose Update cannot be read", "job", j.Name)
			continue
		}
		if finished, _, _ := jobOutcome(j); finished {
			e.deleteDetachedWork(ctx, u)
			continue
		}
		u.MarkRunning(e.detachedIdentity(u), j.CreationTimestamp)
		key := client.ObjectKeyFromObject(u)
		e.mu.Lock()
		e.detached[key] = &detachedRun{u: u, job: j.UID}
		e.mu.Unlock()
		e.queue.Adopt(executor.Item[struct{}]{Key: key})
		log.Info("Adopted detached runner Job", "job", j.Name, "update", key.String())
	}
	return nil
}
