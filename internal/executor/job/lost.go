package job

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/clip"
	"github.com/stackwright/stackwright/internal/controller/patch"
)

// sweep declares lost the running Updates whose Job is gone (deleted by hand, or never
// created because the manager crashed right after the claim), and fails those whose runner
// Pod never started, so that neither holds a slot until the Job's deadline.
func (e *Executor) sweep(ctx context.Context) {
	t := time.NewTicker(e.opts.LostGrace)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.forgetFinished()
		for _, key := range e.queue.Running() {
			if _, _, ok := e.detachedRunOf(key); ok {
				e.checkDetached(ctx, key)
				continue
			}
			e.checkRunner(ctx, key)
		}
	}
}

func (e *Executor) checkRunner(ctx context.Context, key types.NamespacedName) {
	u := &v1alpha1.Update{}
	if err := e.client.Get(ctx, key, u); err != nil {
		if apierrors.IsNotFound(err) {
			e.release(key)
		}
		return
	}
	if u.Status.Phase != v1alpha1.UpdatePhaseRunning || u.Status.Runner != runnerIdentity(u) {
		// Not started yet (claim pending) or finished: nothing to check.
		if u.Status.Finished() {
			e.release(key)
		}
		return
	}
	if u.Status.StartTime != nil && e.now().Sub(u.Status.StartTime.Time) < e.opts.LostGrace {
		return
	}
	j := &batchv1.Job{}
	err := e.reader.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: jobName(u)}, j)
	switch {
	case apierrors.IsNotFound(err):
		e.markLost(ctx, u, "its runner Job was deleted before it reported a result")
	case err == nil:
		e.checkStarted(ctx, u, j)
	}
}

// checkStarted fails u when its runner Pod has not started within PendingTimeout of the
// claim. A Pod the scheduler cannot place (no node fits the tenant's requests, affinity
// or tolerations), or whose image cannot be pulled, stays Pending until the Job's
// deadline, an hour, holding a slot the whole time: a tenant could hold them all. What it
// decides on is read from the API server (the claim's time, the Pods' status), so a
// restarted manager decides the same.
func (e *Executor) checkStarted(ctx context.Context, u *v1alpha1.Update, j *batchv1.Job) {
	if u.Status.StartTime == nil || e.now().Sub(u.Status.StartTime.Time) < e.opts.PendingTimeout {
		return
	}
	// A Job that is not u's own is refused by createJob; a finished one is reconcileJob's.
	if !metav1.IsControlledBy(j, u) {
		return
	}
	if finished, _, _ := jobOutcome(j); finished {
		return
	}
	// A runner whose Pod is ready has started: no need to list its Pods on every sweep.
	if j.Status.Ready != nil && *j.Status.Ready > 0 {
		return
	}
	var pods corev1.PodList
	if err := e.reader.List(ctx, &pods, client.InNamespace(u.Namespace), client.MatchingLabels{LabelUpdateUID: string(u.UID)}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list runner Pods", "update", u.Name)
		return
	}
	why, ok := notStarted(j, pods.Items, e.opts.PendingTimeout)
	if !ok {
		return
	}
	e.failUnstarted(ctx, u, j, why)
}

// notStarted says why the runner of Job j has not started, from its Pods (anyone may
// label a Pod; only those j controls count), or reports false when it has.
func notStarted(j *batchv1.Job, pods []corev1.Pod, timeout time.Duration) (string, bool) {
	var pending []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if !metav1.IsControlledBy(p, j) {
			continue
		}
		if p.Status.Phase != corev1.PodPending || containerStarted(p.Status.ContainerStatuses) {
			return "", false
		}
		pending = append(pending, p)
	}
	if len(pending) == 0 {
		return fmt.Sprintf("its runner Job created no Pod within %s (the Job's events say why)", timeout), true
	}
	p := pending[0]
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("its runner Pod was not scheduled within %s: %s", timeout, clip.Line(cmp.Or(c.Message, c.Reason), maxReasonBytes)), true
		}
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" {
			why := fmt.Sprintf("its runner Pod did not start within %s: container %s is waiting (%s)", timeout, cs.Name, w.Reason)
			if w.Message != "" {
				why += ": " + clip.Line(w.Message, maxReasonBytes)
			}
			return why, true
		}
	}
	if msg := cmp.Or(p.Status.Message, p.Status.Reason); msg != "" {
		return fmt.Sprintf("its runner Pod did not start within %s: %s", timeout, clip.Line(msg, maxReasonBytes)), true
	}
	return fmt.Sprintf("its runner Pod did not start within %s", timeout), true
}

func containerStarted(statuses []corev1.ContainerStatus) bool {
	for _, cs := range statuses {
		if cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
			return true
		}
	}
	return false
}

// maxReasonBytes bounds what a message quotes of the scheduler's or kubelet's: the
// scheduler lists every node's reason, which on a large cluster is long.
const maxReasonBytes = 512

// failUnstarted deletes the Job of u, whose runner never started, then fails u so that its
// Stack retries under its normal backoff. The Job goes first: its Pod, scheduled later,
// would still run the engine, beside the retry. The failure is TransientFailure, not
// RunnerLost: no engine ran, so there is no run for the next up to look for in the
// backend's history (status.stackwright.lostUpdates), and a waiting cluster may catch up.
func (e *Executor) failUnstarted(ctx context.Context, u *v1alpha1.Update, j *batchv1.Job, why string) {
	log := ctrl.LoggerFrom(ctx)
	// The cached copy may lag; the optimistic lock below must not lose to it after the
	// Job is gone.
	fresh := &v1alpha1.Update{}
	if err := e.reader.Get(ctx, client.ObjectKeyFromObject(u), fresh); err != nil {
		log.Error(err, "Failed to get Update", "update", u.Name)
		return
	}
	if fresh.UID != u.UID || fresh.Status.Phase != v1alpha1.UpdatePhaseRunning || fresh.Status.Runner != runnerIdentity(fresh) {
		return
	}
	// Background propagation: the Job is gone at once, and the garbage collector deletes
	// its Pod.
	if err := e.client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &j.UID}); err != nil && !apierrors.IsNotFound(err) {
		log.Error(err, "Failed to delete runner Job that did not start", "update", u.Name, "job", j.Name)
		return
	}
	u = fresh
	p := patch.New(e.client, u, "Update", fieldManager)
	msg := fmt.Sprintf("runner %s did not start: %s; it will be retried", u.Status.Runner, why)
	now := metav1.NewTime(e.now())
	u.Status.Phase, u.Status.Result, u.Status.Message, u.Status.EndTime = v1alpha1.UpdatePhaseFailed, v1alpha1.UpdateResultFailed, msg, &now
	u.MarkFinished(metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonTransientFailure, Message: msg})
	// Should this write fail, the next sweep finds the Job gone and declares the runner
	// lost: the Update fails either way.
	if err := p.Status(ctx, u, patch.WithOptimisticLock()); err != nil {
		log.Error(err, "Failed to fail Update whose runner did not start", "update", u.Name)
		return
	}
	log.Info("Runner did not start; Job deleted", "update", u.Name, "job", j.Name, "reason", why)
	e.cleanup(ctx, u)
	e.release(client.ObjectKeyFromObject(u))
}

// reconcileJob follows a runner Job to its end. A runner that reports its result exits 0
// after the manager has recorded it; a Job that ends any other way lost its runner.
func (e *Executor) reconcileJob(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	j := &batchv1.Job{}
	if err := e.client.Get(ctx, req.NamespacedName, j); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	finished, failed, reason := jobOutcome(j)
	if !finished {
		return ctrl.Result{}, nil
	}
	owner := metav1.GetControllerOf(j)
	if owner == nil || owner.Kind != "Update" {
		return ctrl.Result{}, nil
	}
	u := &v1alpha1.Update{}
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: owner.Name}, u); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	key := client.ObjectKeyFromObject(u)
	if u.UID != owner.UID || u.Status.Phase != v1alpha1.UpdatePhaseRunning || u.Status.Runner != runnerIdentity(u) || !e.ownsStack(ctx, u) {
		e.release(key)
		return ctrl.Result{}, nil
	}
	// The result may be on its way through the API server and the cache.
	if end := jobEnd(j); end != nil && e.now().Sub(end.Time) < e.opts.LostGrace {
		return ctrl.Result{RequeueAfter: e.opts.LostGrace - e.now().Sub(end.Time)}, nil
	}
	if !failed {
		reason = "its runner exited without its result reaching the manager"
	} else if reason == "" {
		reason = e.podFailure(ctx, u.Namespace, u.UID)
	}
	e.markLost(ctx, u, reason)
	return ctrl.Result{}, nil
}

// ownsStack reports whether u's Stack is this manager's: another shard's runners are that
// shard's to watch.
func (e *Executor) ownsStack(ctx context.Context, u *v1alpha1.Update) bool {
	err := e.client.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: u.Spec.StackName}, &pulumiv1.Stack{})
	return err == nil
}

// jobOutcome reads a Job's terminal condition.
func jobOutcome(j *batchv1.Job) (finished, failed bool, reason string) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, false, ""
		case batchv1.JobFailed:
			if c.Reason == batchv1.JobReasonDeadlineExceeded {
				return true, true, fmt.Sprintf("its runner exceeded the deadline of %ds", ptrValue(j.Spec.ActiveDeadlineSeconds))
			}
			return true, true, ""
		}
	}
	return false, false, ""
}

func jobEnd(j *batchv1.Job) *metav1.Time {
	if j.Status.CompletionTime != nil {
		return j.Status.CompletionTime
	}
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobComplete) && c.Status == corev1.ConditionTrue {
			return &c.LastTransitionTime
		}
	}
	return nil
}

// tail is the end of a termination message, at most n bytes of it.
func tail(msg string, n int) string {
	msg = strings.TrimSpace(msg)
	if len(msg) > n {
		msg = msg[len(msg)-n:]
	}
	return msg
}

// podFailure says how the runner Pod of the Update with UID uid, in namespace, ended, from
// what the kubelet recorded.
func (e *Executor) podFailure(ctx context.Context, namespace string, uid types.UID) string {
	var pods corev1.PodList
	if err := e.reader.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{LabelUpdateUID: string(uid)}); err != nil || len(pods.Items) == 0 {
		return "its runner Pod was deleted or evicted before it reported a result"
	}
	p := pods.Items[0]
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return fmt.Sprintf("its runner Pod was disrupted (%s: %s)", c.Reason, c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			if t.Reason == "OOMKilled" {
				limit := ""
				for _, c := range p.Spec.Containers {
					if m, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == cs.Name {
						limit = " of " + m.String()
					}
				}
				return "its runner ran out of memory (limit" + limit + ") and was killed"
			}
			return fmt.Sprintf("its runner exited with code %d (%s): %s", t.ExitCode, t.Reason, tail(t.Message, 512))
		}
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("its runner Pod's init container %s exited with code %d (%s): %s", cs.Name, t.ExitCode, t.Reason, tail(t.Message, 512))
		}
	}
	if p.DeletionTimestamp != nil {
		return "its runner Pod was deleted before it reported a result"
	}
	return fmt.Sprintf("its runner Pod ended in phase %s: %s", p.Status.Phase, p.Status.Message)
}

// markLost fails an Update whose runner ended without a result. RunnerLost is transient:
// the Stack retries under its normal backoff.
func (e *Executor) markLost(ctx context.Context, u *v1alpha1.Update, why string) {
	u = u.DeepCopy()
	p := patch.New(e.client, u, "Update", fieldManager)
	msg := fmt.Sprintf("runner %s lost: %s; it will be retried", u.Status.Runner, why)
	u.MarkRunnerLost(v1alpha1.UpdateResultFailed, msg, metav1.NewTime(e.now()))
	// The optimistic lock loses to a result recorded in the meantime.
	if err := p.Status(ctx, u, patch.WithOptimisticLock()); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to mark Update lost", "update", u.Name)
		return
	}
	ctrl.LoggerFrom(ctx).Info("Runner lost", "update", u.Name, "reason", why)
	e.cleanup(ctx, u)
	e.release(client.ObjectKeyFromObject(u))
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// ctrlFunc adapts a function to reconcile.Reconciler.
type ctrlFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f ctrlFunc) Reconcile(ctx context.Context, r ctrl.Request) (ctrl.Result, error) {
	return f(ctx, r)
}
