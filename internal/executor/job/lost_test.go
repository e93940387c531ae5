package job

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// An evicted runner's message is the kubelet's, which names the limit; an OOM kill names
// the memory limit.
func TestDescribePodFailure_KubeletRecords_SayWhichLimit(t *testing.T) {
	withLimit := corev1.PodSpec{Containers: []corev1.Container{{Name: containerName, Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}}}}
	tests := []struct {
		name        string
		pod         corev1.Pod
		want        string
		wantEvicted bool
	}{
		{
			name: "evicted for ephemeral storage",
			pod: corev1.Pod{Spec: withLimit, Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
				Message: "Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. "}},
			want:        "its runner Pod was evicted by its node: Pod ephemeral local storage usage exceeds the total limit of containers 1Gi.",
			wantEvicted: true,
		},
		{
			name:        "evicted without a message",
			pod:         corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}},
			want:        "its runner Pod was evicted by its node: no reason given",
			wantEvicted: true,
		},
		{
			name: "evicted through the API (a drain)",
			pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting",
			}}}},
			want:        "its runner Pod was evicted (EvictionByEvictionAPI: Eviction API: evicting)",
			wantEvicted: true,
		},
		{
			name: "out of memory",
			pod: corev1.Pod{Spec: withLimit, Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
				Name: containerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}},
			}}}},
			want: "its runner ran out of memory (limit of 2Gi) and was killed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, evicted := describePodFailure(&tt.pod)
			if got != tt.want || evicted != tt.wantEvicted {
				t.Errorf("describePodFailure = %q, %v; want %q, %v", got, evicted, tt.want, tt.wantEvicted)
			}
		})
	}
}
