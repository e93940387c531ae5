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
	"github.com/stackwright/stackwright/internal/executor"
)

// sweep frees the slots of Updates that ended without the executor hearing of it (their
// Update deleted, or finished by the Update controller on a verdict of another replica),
// and follows the detached Updates, which only this executor knows.
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
			u := &v1alpha1.Update{}
			if err := e.client.Get(ctx, key, u); apierrors.IsNotFound(err) || (err == nil && u.Status.Finished()) {
				e.release(key)
			}
		}
	}
}

// Check implements executor.Executor. Its runner is lost when its Job is gone, or ended
// more than LostGrace ago without the result reaching the manager; it never started when
// its Pod is still Pending PendingTimeout after the claim (the scheduler finds no node for
// the tenant's requests, affinity or tolerations, or its image cannot be pulled), and then
// its Job is deleted first, so that a Pod scheduled later cannot run the engine beside
// the retry. Either way its slot is freed. What it decides on is read from the API server
// (the claim's time, the Job and its Pods), so a restarted manager decides the same.
func (e *Executor) Check(ctx context.Context, u *v1alpha1.Update) executor.Verdict {
	if !strings.HasPrefix(u.Status.Runner, "job/") {
		return executor.Verdict{Lost: "the manager it ran in stopped while the update was running"}
	}
	if u.Status.Runner != runnerIdentity(u) {
		return executor.Verdict{Lost: "it is not the runner Job of this Update"}
	}
	if u.Status.StartTime != nil && e.now().Sub(u.Status.StartTime.Time) < e.opts.LostGrace {
		// The Job may not be in the cache yet.
		return executor.Verdict{RecheckAfter: e.opts.LostGrace - e.now().Sub(u.Status.StartTime.Time)}
	}
	j := &batchv1.Job{}
	err := e.reader.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: jobName(u)}, j)
	switch {
	case apierrors.IsNotFound(err):
		e.release(client.ObjectKeyFromObject(u))
		return executor.Verdict{Lost: "its runner Job was deleted before it reported a result"}
	case err != nil:
		ctrl.LoggerFrom(ctx).Error(err, "Failed to get runner Job", "update", u.Name)
		return executor.Verdict{RecheckAfter: e.opts.LostGrace}
	case !metav1.IsControlledBy(j, u):
		// createJob refused it, and failed the Update.
		return executor.Verdict{}
	}
	v := e.judgeJob(ctx, u, j)
	if v.Lost != "" || v.NotStarted != "" {
		e.cleanup(ctx, u)
		e.release(client.ObjectKeyFromObject(u))
	}
	return v
}

// runningRecheck is how often a started runner is looked at without any event: its Job's
// changes are watched, so this only bounds what a missed event could cost.
const runningRecheck = 5 * time.Minute

// judgeJob judges the runner of u from its Job j (in the Stack's namespace, or the
// manager's for a detached Update): lost when j ended more than LostGrace ago without the
// result reaching the manager, never started when its Pod is still Pending
// PendingTimeout after the claim (j is then deleted), alive otherwise.
func (e *Executor) judgeJob(ctx context.Context, u *v1alpha1.Update, j *batchv1.Job) executor.Verdict {
	finished, failed, reason := jobOutcome(j)
	if !finished {
		return e.checkStarted(ctx, u, j)
	}
	// The result may be on its way through the API server and the cache.
	if end := jobEnd(j); end != nil && e.now().Sub(end.Time) < e.opts.LostGrace {
		return executor.Verdict{RecheckAfter: e.opts.LostGrace - e.now().Sub(end.Time)}
	}
	lostReason := ""
	if !failed {
		reason = "its runner exited without its result reaching the manager"
	} else if reason == "" {
		reason, lostReason = e.podFailure(ctx, j.Namespace, u.UID)
	}
	return executor.Verdict{Lost: reason, LostReason: lostReason}
}

// checkStarted judges a runner whose Job has not ended.
func (e *Executor) checkStarted(ctx context.Context, u *v1alpha1.Update, j *batchv1.Job) executor.Verdict {
	// A runner whose Pod is ready has started: no need to list its Pods.
	if j.Status.Ready != nil && *j.Status.Ready > 0 {
		return executor.Verdict{RecheckAfter: runningRecheck}
	}
	if u.Status.StartTime == nil {
		return executor.Verdict{RecheckAfter: e.opts.PendingTimeout}
	}
	if left := e.opts.PendingTimeout - e.now().Sub(u.Status.StartTime.Time); left > 0 {
		return executor.Verdict{RecheckAfter: left}
	}
	log := ctrl.LoggerFrom(ctx)
	var pods corev1.PodList
	if err := e.reader.List(ctx, &pods, client.InNamespace(j.Namespace), client.MatchingLabels{LabelUpdateUID: string(u.UID)}); err != nil {
		log.Error(err, "Failed to list runner Pods", "update", u.Name)
		return executor.Verdict{RecheckAfter: e.opts.LostGrace}
	}
	why, ok := notStarted(j, pods.Items, e.opts.PendingTimeout)
	if !ok {
		return executor.Verdict{RecheckAfter: runningRecheck}
	}
	// Background propagation: the Job is gone at once, and the garbage collector deletes
	// its Pod.
	if err := e.client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &j.UID}); err != nil && !apierrors.IsNotFound(err) {
		log.Error(err, "Failed to delete runner Job that did not start", "update", u.Name, "job", j.Name)
		return executor.Verdict{RecheckAfter: e.opts.LostGrace}
	}
	log.Info("Runner did not start; Job deleted", "update", u.Name, "job", j.Name, "reason", why)
	return executor.Verdict{NotStarted: why}
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
// what the kubelet recorded, and the Update's reason for it (describePodFailure).
func (e *Executor) podFailure(ctx context.Context, namespace string, uid types.UID) (string, string) {
	var pods corev1.PodList
	if err := e.reader.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{LabelUpdateUID: string(uid)}); err != nil || len(pods.Items) == 0 {
		return "its runner Pod was deleted or evicted before it reported a result", v1alpha1.ReasonRunnerLost
	}
	return describePodFailure(&pods.Items[0])
}

// describePodFailure says how the runner Pod p ended, and the Update's reason for it:
// Evicted (by its node, or disrupted by the cluster: a drain, a preemption), OOMKilled
// (the kernel killed the runner's container at its memory limit), or RunnerLost.
func describePodFailure(p *corev1.Pod) (string, string) {
	if p.Status.Reason == "Evicted" {
		// The kubelet's message names the resource and the limit ("Pod ephemeral local
		// storage usage exceeds the total limit of containers 1Gi.").
		return "its runner Pod was evicted by its node: " + clip.Line(cmp.Or(p.Status.Message, "no reason given"), maxReasonBytes), v1alpha1.ReasonEvicted
	}
	if why := podDisruption(p); why != "" {
		return why, v1alpha1.ReasonEvicted
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			if t.Reason == "OOMKilled" {
				if t.ExitCode != oomExitCode {
					// Container runtimes say OOMKilled when their cgroup counted any OOM
					// kill: here one of the runner's processes, after which it failed.
					return fmt.Sprintf("its runner ran out of memory (%s): a process of it was killed, and it exited with code %d: %s",
						memoryLimit(p, cs.Name), t.ExitCode, tail(t.Message, 512)), v1alpha1.ReasonOOMKilled
				}
				return "its runner ran out of memory (" + memoryLimit(p, cs.Name) + ") and was killed", v1alpha1.ReasonOOMKilled
			}
			return fmt.Sprintf("its runner exited with code %d (%s): %s", t.ExitCode, t.Reason, tail(t.Message, 512)), v1alpha1.ReasonRunnerLost
		}
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			if t.Reason == "OOMKilled" {
				return fmt.Sprintf("its runner Pod's init container %s ran out of memory (%s) and was killed", cs.Name, memoryLimit(p, cs.Name)), v1alpha1.ReasonOOMKilled
			}
			return fmt.Sprintf("its runner Pod's init container %s exited with code %d (%s): %s", cs.Name, t.ExitCode, t.Reason, tail(t.Message, 512)), v1alpha1.ReasonRunnerLost
		}
	}
	if p.DeletionTimestamp != nil {
		return "its runner Pod was deleted before it reported a result", v1alpha1.ReasonRunnerLost
	}
	return fmt.Sprintf("its runner Pod ended in phase %s: %s", p.Status.Phase, p.Status.Message), v1alpha1.ReasonRunnerLost
}

// oomExitCode is the exit code of a container whose main process was killed by the OOM
// killer: 128 + SIGKILL.
const oomExitCode = 137

// memoryLimit names the memory limit of p's container (or init container) name: "limit
// of 2Gi", or "no memory limit of its own" (the Pod's, or the node's, memory ran out).
func memoryLimit(p *corev1.Pod, name string) string {
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		if m, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == name {
			return "limit of " + m.String()
		}
	}
	return "no memory limit of its own"
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
