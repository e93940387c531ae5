package stack

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/scheme"
)

// Retention keeps the newest finished Updates up to the count and the age limits, never the
// ones the status names, and says when the next kept one ages out. A fake client stands in
// for the API server: this is the selection alone; the envtest suites run it for real.
func TestReconciler_PruneUpdates_KeepsNewestWithinCountAndAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"}}
	stack.Status.LastUpdate = &pulumiv1.StackUpdateState{Name: "deployed"}
	stack.Status.DriftDetection = &pulumiv1.DriftDetectionStatus{LastUpdate: "last-check"}
	stack.Status.OutputsExport = &pulumiv1.OutputsExportStatus{Update: "published"}
	update := func(name string, age time.Duration, finished bool) *v1alpha1.Update {
		end := metav1.NewTime(now.Add(-age))
		u := &v1alpha1.Update{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(end.Add(-time.Minute)),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "pulumi.com/v1", Kind: "Stack", Name: "web", UID: "uid-web", Controller: ptr.To(true)}}},
			Spec: v1alpha1.UpdateSpec{StackName: "web"},
		}
		if finished {
			u.Status = v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseSucceeded, EndTime: &end}
		}
		return u
	}
	all := []client.Object{
		update("deployed", 30*24*time.Hour, true),   // named by status.lastUpdate: kept at any age
		update("last-check", 30*24*time.Hour, true), // named by status.driftDetection: kept
		update("published", 30*24*time.Hour, true),  // named by status.outputsExport: kept
		update("running", 40*24*time.Hour, false),   // not finished: never pruned
		update("fresh-1", time.Hour, true),
		update("fresh-2", 2*time.Hour, true),
		update("fresh-3", 3*time.Hour, true),
		update("old", 8*24*time.Hour, true),
	}
	tests := []struct {
		name     string
		history  int
		maxAge   time.Duration
		ttl      string // the Stack's updateTemplate.spec.ttlAfterCompleted
		want     []string
		wantNext time.Duration
	}{
		{name: "noLimitsKeepsAll", want: []string{"deployed", "fresh-1", "fresh-2", "fresh-3", "last-check", "old", "published", "running"}},
		{name: "ageLimitDropsOld", maxAge: 7 * 24 * time.Hour, want: []string{"deployed", "fresh-1", "fresh-2", "fresh-3", "last-check", "published", "running"}, wantNext: 7*24*time.Hour - 3*time.Hour},
		{name: "countLimitCountsKeptOnes", history: 5, want: []string{"deployed", "fresh-1", "fresh-2", "last-check", "published", "running"}},
		{name: "bothLimits", history: 4, maxAge: 2*time.Hour + 30*time.Minute, want: []string{"deployed", "fresh-1", "last-check", "published", "running"}, wantNext: 90 * time.Minute},
		{name: "ttlAfterCompletedShortensTheAge", maxAge: 7 * 24 * time.Hour, ttl: "90m", want: []string{"deployed", "fresh-1", "last-check", "published", "running"}, wantNext: 30 * time.Minute},
		{name: "ttlAfterCompletedAloneLimits", ttl: "150m", want: []string{"deployed", "fresh-1", "fresh-2", "last-check", "published", "running"}, wantNext: 30 * time.Minute},
		{name: "ttlLongerThanTheManagersAgeChangesNothing", maxAge: 7 * 24 * time.Hour, ttl: "720h", want: []string{"deployed", "fresh-1", "fresh-2", "fresh-3", "last-check", "published", "running"}, wantNext: 7*24*time.Hour - 3*time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sch, err := scheme.New()
			if err != nil {
				t.Fatal(err)
			}
			objs := make([]client.Object, len(all))
			for i, o := range all {
				objs[i] = o.DeepCopyObject().(client.Object)
			}
			c := fake.NewClientBuilder().WithScheme(sch).WithObjects(objs...).
				WithIndex(&v1alpha1.Update{}, IndexUpdateStack, func(o client.Object) []string { return []string{o.(*v1alpha1.Update).Spec.StackName} }).
				Build()
			r := &Reconciler{Client: c, Now: func() time.Time { return now }, Options: Options{UpdateHistory: tt.history, UpdateMaxAge: tt.maxAge}}
			st := stack.DeepCopy()
			if tt.ttl != "" {
				st.Spec.UpdateTemplate = &pulumiv1.UpdateTemplate{Spec: &pulumiv1.UpdateTemplateSpec{TTLAfterCompleted: tt.ttl}}
			}
			next, err := r.pruneUpdates(t.Context(), st)
			if err != nil {
				t.Fatal(err)
			}
			var list v1alpha1.UpdateList
			if err := c.List(t.Context(), &list); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range list.Items {
				got = append(got, u.Name)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("kept Updates (-want +got):\n%s", diff)
			}
			if next != tt.wantNext {
				t.Errorf("next expiry in %s; want %s", next, tt.wantNext)
			}
		})
	}
}
