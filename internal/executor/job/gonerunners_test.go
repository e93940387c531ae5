package job

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/scheme"
)

// The runners whose locks the next runner may remove are exactly the earlier runner Jobs
// of the Stack whose Update is finished and none of whose Pods still runs, and finding
// them costs one list of Pods (which are not cached) per maxUIDsPerList earlier Updates,
// not one per Update.
func TestGoneRunners_EarlierRunners_ProvenGoneByTheirPods(t *testing.T) {
	current := testUpdate("web-new")
	current.UID = "uid-new"
	earlier := func(name string, phase v1alpha1.UpdatePhase, runner string) *v1alpha1.Update {
		u := testUpdate(name)
		u.UID = types.UID("uid-" + name)
		u.Labels = map[string]string{v1alpha1.StackLabel: u.Spec.StackName}
		u.Status.Phase, u.Status.Runner = phase, runner
		if runner == "" {
			u.Status.Runner = runnerIdentity(u)
		}
		return u
	}
	pod := func(name string, of *v1alpha1.Update, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: of.Namespace, Name: name, Labels: map[string]string{LabelUpdateUID: string(of.UID)}},
			Status:     corev1.PodStatus{Phase: phase},
		}
	}
	many := func(n int) []client.Object {
		var objs []client.Object
		for i := range n {
			u := earlier(fmt.Sprintf("web-%03d", i), v1alpha1.UpdatePhaseFailed, "")
			objs = append(objs, u)
			if i%2 == 0 {
				objs = append(objs, pod(fmt.Sprintf("web-%03d-pod", i), u, corev1.PodRunning))
			}
		}
		return objs
	}
	gone := func(names ...string) []string {
		var hosts []string
		for _, n := range names {
			hosts = append(hosts, JobName(n))
		}
		return hosts
	}
	var (
		succeeded = earlier("web-succeeded", v1alpha1.UpdatePhaseSucceeded, "")
		stillUp   = earlier("web-still-up", v1alpha1.UpdatePhaseFailed, "")
		noPod     = earlier("web-no-pod", v1alpha1.UpdatePhaseFailed, "")
		running   = earlier("web-running", v1alpha1.UpdatePhaseRunning, "")
		inManager = earlier("web-in-manager", v1alpha1.UpdatePhaseFailed, "manager/stackwright-0")
	)
	type outcome struct {
		Hosts    []string
		PodLists int
	}
	for _, tc := range []struct {
		name string
		objs []client.Object
		want outcome
	}{
		{name: "a Stack's first Update lists no Pods", want: outcome{}},
		{
			name: "finished runners whose Pods ended or are gone are proven gone; one list",
			objs: []client.Object{
				succeeded, pod("succeeded-pod", succeeded, corev1.PodSucceeded),
				stillUp, pod("still-up-old", stillUp, corev1.PodFailed), pod("still-up-pod", stillUp, corev1.PodRunning),
				noPod,
				running, pod("running-pod", running, corev1.PodRunning),
				inManager,
			},
			want: outcome{Hosts: gone("web-no-pod", "web-succeeded"), PodLists: 1},
		},
		{
			name: "a Pod pending or in an unknown phase has not ended",
			objs: []client.Object{stillUp, pod("still-up-pod", stillUp, corev1.PodPending), noPod, pod("no-pod-unknown", noPod, corev1.PodUnknown)},
			want: outcome{PodLists: 1},
		},
		{
			name: "a long history is listed in chunks",
			objs: many(maxUIDsPerList + 1),
			want: outcome{Hosts: func() []string {
				var names []string
				for i := 1; i <= maxUIDsPerList; i += 2 {
					names = append(names, fmt.Sprintf("web-%03d", i))
				}
				return gone(names...)
			}(), PodLists: 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sch, err := scheme.New()
			if err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(sch).WithObjects(append(tc.objs, current)...).Build()
			var got outcome
			reader := interceptor.NewClient(c, interceptor.Funcs{
				List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if _, ok := list.(*corev1.PodList); ok {
						got.PodLists++
					}
					return cl.List(ctx, list, opts...)
				},
			})
			hosts, err := (&Executor{client: c, reader: reader}).goneRunners(t.Context(), current)
			if err != nil {
				t.Fatal(err)
			}
			got.Hosts = hosts
			if diff := cmp.Diff(tc.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
