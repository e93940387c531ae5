package console

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/kubectlplugin"
	"github.com/stackwright/stackwright/internal/scheme"
)

func TestServer_RunnerLog_PodWhileItExistsElseTheLogTail(t *testing.T) {
	runnerPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-1-runner-x", Labels: map[string]string{batchv1.JobNameLabel: "web-1-runner"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "runner"}}},
	}
	forbidden := interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New(`User "tenant" cannot list resource "pods"`))
	}}
	tests := []struct {
		name   string
		runner string
		pods   []client.Object
		funcs  interceptor.Funcs
		// want is text, source and note.
		want []string
	}{
		{name: "run in the manager's process", runner: "local/vm/1/abc",
			want: []string{"tail", "the Update's log tail (status.logTail)", ""}},
		{name: "runner Pod exists", runner: "job/web-1-runner", pods: []client.Object{runnerPod},
			want: []string{"fake logs", "runner Pod team/web-1-runner-x", ""}},
		{name: "runner Pod gone", runner: "job/web-1-runner",
			want: []string{"tail", "the Update's log tail (status.logTail)", ""}},
		{name: "Pods not readable", runner: "job/web-1-runner", pods: []client.Object{runnerPod}, funcs: forbidden,
			want: []string{"tail", "the Update's log tail (status.logTail)", `failed to list the Pods of runner Job team/web-1-runner: pods is forbidden: User "tenant" cannot list resource "pods"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := scheme.New()
			if err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(tt.pods...).WithInterceptorFuncs(tt.funcs).Build()
			srv := &Server{env: &kubectlplugin.Env{Client: c}, pods: kubefake.NewClientset().CoreV1()}
			u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-1"},
				Status: v1alpha1.UpdateStatus{Runner: tt.runner, LogTail: "tail"}}
			text, source, note := srv.runnerLog(t.Context(), u)
			if diff := cmp.Diff(tt.want, []string{text, source, note}); diff != "" {
				t.Errorf("runnerLog (-want +got):\n%s", diff)
			}
		})
	}
}
