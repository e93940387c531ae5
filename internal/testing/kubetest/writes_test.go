package kubetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Every write of a wrapped client is recorded under its object's namespace, with its
// kind, its object and an event's reason; reads are not, and each write is taken once.
func TestWrites_Wrap_RecordsEachWriteOnce(t *testing.T) {
	ns, other := env.Namespace(t), env.Namespace(t)
	var w Writes
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = w.Wrap
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}}
	if err := c.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sec), sec); err != nil {
		t.Fatal(err)
	}
	sec.StringData = map[string]string{"k": "v"}
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e"},
		Regarding:  corev1.ObjectReference{Kind: "Stack", Namespace: ns, Name: "w"},
		Reason:     "UpdateSucceeded", Action: "Reconcile", Type: corev1.EventTypeNormal, Note: "up succeeded",
		EventTime: metav1.NowMicro(), ReportingController: "stackwright.dev/test", ReportingInstance: "test",
	}
	if err := c.Create(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "c"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, sec); err != nil {
		t.Fatal(err)
	}
	want := []Write{
		{Verb: "POST", Resource: "secrets"},
		{Verb: "PUT", Resource: "secrets", Name: "s"},
		{Verb: "POST", Resource: "events", Regarding: "Stack", Reason: "UpdateSucceeded"},
		{Verb: "DELETE", Resource: "secrets", Name: "s"},
	}
	if diff := cmp.Diff(want, w.Take(ns)); diff != "" {
		t.Errorf("writes in %s (-want +got):\n%s", ns, diff)
	}
	if got := w.Take(ns); len(got) > 0 {
		t.Errorf("writes taken again: %v", got)
	}
	if diff := cmp.Diff([]string{"POST configmaps"}, kinds(w.Take(other))); diff != "" {
		t.Errorf("writes in %s (-want +got):\n%s", other, diff)
	}
}

func kinds(writes []Write) []string {
	var out []string
	for _, w := range writes {
		out = append(out, w.String())
	}
	return out
}
