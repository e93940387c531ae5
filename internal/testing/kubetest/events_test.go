package kubetest

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// stubRecorder keeps the reasons of the events it is given.
type stubRecorder struct{ reasons []string }

func (s *stubRecorder) Eventf(_, _ runtime.Object, _, reason, _, _ string, _ ...any) {
	s.reasons = append(s.reasons, reason)
}

// The recorder reads the object the event is about from the API server as the event comes,
// and keeps what the event announces that the stored object does not show yet: here an
// event "Set" announces the ConfigMap's value of k. An object whose deletion completed has
// nothing left to show; one that cannot be read shows nothing.
func TestRecorder_Eventf_KeepsWhatTheStoredObjectDoesNotShow(t *testing.T) {
	ns := env.Namespace(t)
	stored := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stored"}, Data: map[string]string{"k": "old"}}
	if err := env.Client.Create(t.Context(), stored); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	deleted := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deleted", DeletionTimestamp: &now}}
	missing := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "missing"}}
	rec := NewRecorder(env.Client, func(e Event, _, stored *corev1.ConfigMap) error {
		if want := "k=" + stored.Data["k"]; e.Reason == "Set" && e.Message != want {
			return fmt.Errorf("%q, but the stored ConfigMap says %s", e.Message, want)
		}
		return nil
	})
	next := &stubRecorder{}
	wrapped := rec.Wrap(next)

	wrapped.Eventf(stored, nil, corev1.EventTypeNormal, "Set", "", "k=%s", "old")
	wrapped.Eventf(stored, nil, corev1.EventTypeNormal, "Set", "", "k=%s", "new")
	wrapped.Eventf(stored, nil, corev1.EventTypeNormal, "Other", "", "k=new")
	wrapped.Eventf(deleted, nil, corev1.EventTypeNormal, "Set", "", "k=new")
	wrapped.Eventf(missing, nil, corev1.EventTypeWarning, "Set", "", "k=new")
	wrapped.Eventf(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-kind"}}, nil, corev1.EventTypeNormal, "Set", "", "k=new")

	got := rec.Of(ns, "")
	want := []Event{
		{Namespace: ns, Name: "stored", Type: corev1.EventTypeNormal, Reason: "Set", Message: "k=old"},
		{Namespace: ns, Name: "stored", Type: corev1.EventTypeNormal, Reason: "Set", Message: "k=new", Unwritten: `"k=new", but the stored ConfigMap says k=old`},
		{Namespace: ns, Name: "stored", Type: corev1.EventTypeNormal, Reason: "Other", Message: "k=new"},
		{Namespace: ns, Name: "deleted", Type: corev1.EventTypeNormal, Reason: "Set", Message: "k=new"},
		{Namespace: ns, Name: "missing", Type: corev1.EventTypeWarning, Reason: "Set", Message: "k=new", Unwritten: `failed to read it: configmaps "missing" not found`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events kept (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Set", "Set", "Other", "Set", "Set", "Set"}, next.reasons); diff != "" {
		t.Errorf("events passed on (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Set", "Set", "Other"}, rec.Reasons(ns, "stored")); diff != "" {
		t.Errorf("Reasons (-want +got):\n%s", diff)
	}
	if n := rec.Count("", "", "Set"); n != 4 {
		t.Errorf("Count of Set in every namespace = %d; want 4", n)
	}
	if n := len(rec.Unwritten(ns)); n != 2 {
		t.Errorf("Unwritten(%s) has %d lines; want 2: %q", ns, n, rec.Unwritten(ns))
	}
	if late := rec.Unwritten("elsewhere"); len(late) != 0 {
		t.Errorf("Unwritten of another namespace = %q; want none", late)
	}
}
