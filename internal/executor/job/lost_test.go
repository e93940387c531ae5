package job

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/scheme"
)

// withMemoryLimit is a runner Pod's spec whose runner container (and bootstrap init
// container) may use limit of memory.
func withMemoryLimit(limit string) corev1.PodSpec {
	res := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}}
	return corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "bootstrap", Resources: res}},
		Containers:     []corev1.Container{{Name: containerName, Resources: res}},
	}
}

// terminated is a container status of name, ended for reason with code.
func terminated(name, reason string, code int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code}}}
}

// An evicted runner's message is the kubelet's, which names the limit; an OOM kill names
// the memory limit and is reason OOMKilled, anything else RunnerLost.
func TestDescribePodFailure_KubeletRecords_SayWhichLimitAndReason(t *testing.T) {
	type outcome struct{ Why, Reason string }
	tests := []struct {
		name string
		pod  corev1.Pod
		want outcome
	}{
		{
			name: "evictedForEphemeralStorage",
			pod: corev1.Pod{Spec: withMemoryLimit("2Gi"), Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
				Message: "Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. "}},
			want: outcome{"its runner Pod was evicted by its node: Pod ephemeral local storage usage exceeds the total limit of containers 1Gi.", v1alpha1.ReasonEvicted},
		},
		{
			name: "evictedWithoutAMessage",
			pod:  corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}},
			want: outcome{"its runner Pod was evicted by its node: no reason given", v1alpha1.ReasonEvicted},
		},
		{
			name: "evictedThroughTheAPI",
			pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting",
			}}}},
			want: outcome{"its runner Pod was evicted (EvictionByEvictionAPI: Eviction API: evicting)", v1alpha1.ReasonEvicted},
		},
		{
			name: "outOfMemory",
			pod: corev1.Pod{Spec: withMemoryLimit("2Gi"), Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
				terminated(containerName, "OOMKilled", 137),
			}}},
			want: outcome{"its runner ran out of memory (limit of 2Gi) and was killed", v1alpha1.ReasonOOMKilled},
		},
		{
			name: "aProcessOutOfMemory",
			pod: corev1.Pod{Spec: withMemoryLimit("2Gi"), Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
				Name: containerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 1, Message: "manager refused the result\n"}},
			}}}},
			want: outcome{"its runner ran out of memory (limit of 2Gi): a process of it was killed, and it exited with code 1: manager refused the result", v1alpha1.ReasonOOMKilled},
		},
		{
			name: "outOfMemoryWithoutALimitOfItsOwn",
			pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
				terminated(containerName, "OOMKilled", 137),
			}}},
			want: outcome{"its runner ran out of memory (no memory limit of its own) and was killed", v1alpha1.ReasonOOMKilled},
		},
		{
			name: "initContainerOutOfMemory",
			pod: corev1.Pod{Spec: withMemoryLimit("64Mi"), Status: corev1.PodStatus{Phase: corev1.PodFailed, InitContainerStatuses: []corev1.ContainerStatus{
				terminated("bootstrap", "OOMKilled", 137),
			}}},
			want: outcome{"its runner Pod's init container bootstrap ran out of memory (limit of 64Mi) and was killed", v1alpha1.ReasonOOMKilled},
		},
		{
			name: "killed",
			pod: corev1.Pod{Spec: withMemoryLimit("2Gi"), Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
				terminated(containerName, "Error", 137),
			}}},
			want: outcome{"its runner exited with code 137 (Error): ", v1alpha1.ReasonRunnerLost},
		},
		{
			name: "deleted",
			pod:  corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
			want: outcome{"its runner Pod was deleted before it reported a result", v1alpha1.ReasonRunnerLost},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got outcome
			got.Why, got.Reason = describePodFailure(&tt.pod)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A runner Job that failed without its result reaching the manager is judged from its Pod:
// the Update then fails with the reason the kubelet's record gives (OOMKilled naming the
// limit, Evicted, or RunnerLost).
func TestExecutor_Check_LostRunnerFailsWithItsPodsReason(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	type outcome struct {
		Lost, LostReason string
		Reason, Message  string
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want outcome
	}{
		{
			name: "containerOOMKilled",
			pod: &corev1.Pod{Spec: withMemoryLimit("256Mi"), Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
				terminated(containerName, "OOMKilled", 137),
			}}},
			want: outcome{
				Lost: "its runner ran out of memory (limit of 256Mi) and was killed", LostReason: v1alpha1.ReasonOOMKilled, Reason: v1alpha1.ReasonOOMKilled,
				Message: "runner " + runnerIdentity(testUpdate("web-1")) + " lost: its runner ran out of memory (limit of 256Mi) and was killed; it will be retried",
			},
		},
		{
			name: "containerKilled",
			pod: &corev1.Pod{Spec: withMemoryLimit("256Mi"), Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
				terminated(containerName, "Error", 137),
			}}},
			want: outcome{
				Lost: "its runner exited with code 137 (Error): ", LostReason: v1alpha1.ReasonRunnerLost, Reason: v1alpha1.ReasonRunnerLost,
				Message: "runner " + runnerIdentity(testUpdate("web-1")) + " lost: its runner exited with code 137 (Error): ; it will be retried",
			},
		},
		{
			name: "podGone",
			want: outcome{
				Lost: "its runner Pod was deleted or evicted before it reported a result", LostReason: v1alpha1.ReasonRunnerLost, Reason: v1alpha1.ReasonRunnerLost,
				Message: "runner " + runnerIdentity(testUpdate("web-1")) + " lost: its runner Pod was deleted or evicted before it reported a result; it will be retried",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sch, err := scheme.New()
			if err != nil {
				t.Fatal(err)
			}
			u := testUpdate("web-1")
			u.MarkRunning(runnerIdentity(u), metav1.NewTime(now.Add(-10*time.Minute)))
			ended := metav1.NewTime(now.Add(-time.Minute))
			j := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Namespace: u.Namespace, Name: jobName(u), OwnerReferences: []metav1.OwnerReference{{
					APIVersion: v1alpha1.GroupVersion.String(), Kind: "Update", Name: u.Name, UID: u.UID, Controller: ptr(true),
				}}},
				Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{
					Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, LastTransitionTime: ended,
				}}},
			}
			objs := []client.Object{u, j}
			if tt.pod != nil {
				tt.pod.ObjectMeta = metav1.ObjectMeta{Namespace: u.Namespace, Name: j.Name + "-abcde", Labels: map[string]string{LabelUpdateUID: string(u.UID)}}
				objs = append(objs, tt.pod)
			}
			c := fake.NewClientBuilder().WithScheme(sch).WithObjects(objs...).Build()
			e := newDetachingExecutor(c)
			e.now = func() time.Time { return now }
			v := e.Check(t.Context(), u)
			got := outcome{Lost: v.Lost, LostReason: v.LostReason}
			if !v.Apply(u, metav1.NewTime(now)) {
				t.Fatalf("verdict %+v left the Update running", v)
			}
			for _, c := range u.Status.Conditions {
				if c.Type == v1alpha1.ConditionComplete {
					got.Reason = c.Reason
				}
			}
			got.Message = u.Status.Message
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
