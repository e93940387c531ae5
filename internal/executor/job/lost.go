package job

import (
	"context"
	"fmt"
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
	"github.com/stackwright/stackwright/internal/controller/patch"
)

// sweep declares lost the running Updates whose Job is gone (deleted by hand, or never
// created because the manager crashed right after the claim).
func (e *Executor) sweep(ctx context.Context) {
	t := time.NewTicker(e.opts.LostGrace)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.mu.Lock()
		keys := make([]types.NamespacedName, 0, len(e.running))
		for k := range e.running {
			keys = append(keys, k)
		}
		e.mu.Unlock()
		for _, key := range keys {
			e.checkJobExists(ctx, key)
		}
	}
}

func (e *Executor) checkJobExists(ctx context.Context, key types.NamespacedName) {
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
	err := e.reader.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: jobName(u)}, &batchv1.Job{})
	if apierrors.IsNotFound(err) {
		e.markLost(ctx, u, "its runner Job was deleted before it reported a result")
	}
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
		reason = e.podFailure(ctx, u)
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

// podFailure says how the runner Pod of u ended, from what the kubelet recorded.
func (e *Executor) podFailure(ctx context.Context, u *v1alpha1.Update) string {
	var pods corev1.PodList
	if err := e.reader.List(ctx, &pods, client.InNamespace(u.Namespace), client.MatchingLabels{LabelUpdateUID: string(u.UID)}); err != nil || len(pods.Items) == 0 {
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
