package job

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNotStarted_RunnerPods_SaysWhyTheRunnerHasNotStarted(t *testing.T) {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-abc-1-runner", UID: "job-uid"}}
	pod := func(phase corev1.PodPhase, mutate func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: j.Name + "-x", OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr(true)},
			}},
			Status: corev1.PodStatus{Phase: phase},
		}
		if mutate != nil {
			mutate(&p)
		}
		return p
	}
	unschedulable := func(msg string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}
		}
	}
	waiting := func(init bool, reason, msg string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
			cs := corev1.ContainerStatus{Name: "runner", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
			if init {
				cs.Name = "bootstrap"
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{cs}
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "runner", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
				return
			}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		}
	}
	type outcome struct {
		Why     string
		Pending bool
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want outcome
	}{
		{
			name: "no Pod: the Job could not create one (quota, admission)",
			want: outcome{Why: "its runner Job created no Pod within 5m0s (the Job's events say why)", Pending: true},
		},
		{
			name: "unschedulable: the scheduler's message is quoted",
			pods: []corev1.Pod{pod(corev1.PodPending, unschedulable("0/1 nodes are available: 1 Insufficient cpu."))},
			want: outcome{Why: "its runner Pod was not scheduled within 5m0s: 0/1 nodes are available: 1 Insufficient cpu.", Pending: true},
		},
		{
			name: "unschedulable without a message: the reason stands in",
			pods: []corev1.Pod{pod(corev1.PodPending, unschedulable(""))},
			want: outcome{Why: "its runner Pod was not scheduled within 5m0s: Unschedulable", Pending: true},
		},
		{
			name: "unschedulable on a large cluster: the message is clipped",
			pods: []corev1.Pod{pod(corev1.PodPending, unschedulable("0/5000 nodes are available: "+strings.Repeat("1 node(s) had untolerated taint. ", 100)))},
			want: outcome{Why: "its runner Pod was not scheduled within 5m0s: 0/5000 nodes are available: " + strings.TrimSpace(strings.Repeat("1 node(s) had untolerated taint. ", 100))[:maxReasonBytes-len("0/5000 nodes are available: ")-len("…")] + "…", Pending: true},
		},
		{
			name: "image pull failing: the container's waiting reason is quoted",
			pods: []corev1.Pod{pod(corev1.PodPending, waiting(false, "ImagePullBackOff", `Back-off pulling image "example.com/nope:1"`))},
			want: outcome{Why: `its runner Pod did not start within 5m0s: container runner is waiting (ImagePullBackOff): Back-off pulling image "example.com/nope:1"`, Pending: true},
		},
		{
			name: "init container's image failing: it is named, not the runner waiting for it",
			pods: []corev1.Pod{pod(corev1.PodPending, waiting(true, "ErrImagePull", "not found"))},
			want: outcome{Why: "its runner Pod did not start within 5m0s: container bootstrap is waiting (ErrImagePull): not found", Pending: true},
		},
		{
			name: "waiting without a message",
			pods: []corev1.Pod{pod(corev1.PodPending, waiting(false, "CreateContainerConfigError", ""))},
			want: outcome{Why: "its runner Pod did not start within 5m0s: container runner is waiting (CreateContainerConfigError)", Pending: true},
		},
		{
			name: "pending with nothing to say",
			pods: []corev1.Pod{pod(corev1.PodPending, nil)},
			want: outcome{Why: "its runner Pod did not start within 5m0s", Pending: true},
		},
		{
			name: "running: the runner started",
			pods: []corev1.Pod{pod(corev1.PodRunning, nil)},
		},
		{
			name: "ended: the Job's end is reconcileJob's to judge",
			pods: []corev1.Pod{pod(corev1.PodFailed, nil)},
		},
		{
			name: "pending but a container ran: the engine may have started",
			pods: []corev1.Pod{pod(corev1.PodPending, func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "runner", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
			})},
		},
		{
			name: "a Pod the Job does not control is ignored: a tenant may label one as the runner",
			pods: []corev1.Pod{pod(corev1.PodRunning, func(p *corev1.Pod) { p.OwnerReferences = nil })},
			want: outcome{Why: "its runner Job created no Pod within 5m0s (the Job's events say why)", Pending: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why, pending := notStarted(j, tc.pods, 5*time.Minute)
			if diff := cmp.Diff(tc.want, outcome{Why: why, Pending: pending}); diff != "" {
				t.Errorf("notStarted (-want +got):\n%s", diff)
			}
		})
	}
}
