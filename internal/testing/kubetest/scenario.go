package kubetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Waits poll for minutes: a controller that runs real engines takes seconds per run, and a
// package's tests running in parallel on a two-core CI machine queue behind each other.
const (
	waitTimeout = 3 * time.Minute
	waitPolling = 250 * time.Millisecond
)

// Scenario is one test's share of the package's control plane: a namespace of its own, so
// that tests can run in parallel against one shared manager, and waits sized for
// controllers that run real engines. Objects are named by their name alone; their
// namespace is always the scenario's.
type Scenario struct {
	// Namespace is the test's own: Create puts objects there, and Get and the waits read
	// them from there.
	Namespace string

	t   testing.TB
	env *Env
	g   *gomega.WithT
}

// Scenario gives the test a namespace of its own on the control plane.
func (e *Env) Scenario(t testing.TB) *Scenario {
	t.Helper()
	return &Scenario{Namespace: e.Namespace(t), t: t, env: e, g: gomega.NewWithT(t)}
}

// Conditioned is an object whose status carries conditions (Stack, Program, Update).
type Conditioned interface {
	client.Object
	GetConditions() []metav1.Condition
}

// Create creates obj in the scenario's namespace, failing the test if it cannot.
func (s *Scenario) Create(obj client.Object) {
	s.t.Helper()
	obj.SetNamespace(s.Namespace)
	if err := s.env.Client.Create(s.t.Context(), obj); err != nil {
		s.t.Fatalf("failed to create %T %s: %v", obj, obj.GetName(), err)
	}
}

// Get replaces obj (a typed object) with the stored object of its name. obj is zeroed
// first: decoding into a used object would keep fields the server has since dropped.
func (s *Scenario) Get(obj client.Object) error {
	key := client.ObjectKey{Namespace: s.Namespace, Name: obj.GetName()}
	v := reflect.ValueOf(obj).Elem()
	v.Set(reflect.Zero(v.Type()))
	if err := s.env.Client.Get(s.t.Context(), key, obj); err != nil {
		// The zeroed obj lost its name: without it, every later poll of an Eventually
		// that retries this Get (an object not yet in the cache) would ask for "".
		obj.SetName(key.Name)
		return fmt.Errorf("failed to get %T %s: %w", obj, key.Name, err)
	}
	return nil
}

// Patch applies mutate to obj and sends the difference as a merge patch, failing the test
// if it cannot.
func (s *Scenario) Patch(obj client.Object, mutate func()) {
	s.t.Helper()
	base := obj.DeepCopyObject().(client.Object)
	mutate()
	if err := s.env.Client.Patch(s.t.Context(), obj, client.MergeFrom(base)); err != nil {
		s.t.Fatalf("failed to patch %T %s: %v", obj, obj.GetName(), err)
	}
}

// Eventually polls f until it passes, failing the test if it does not within the budget.
func (s *Scenario) Eventually(f func(g gomega.Gomega)) {
	s.t.Helper()
	s.g.Eventually(f).WithTimeout(waitTimeout).WithPolling(waitPolling).Should(gomega.Succeed())
}

// WaitCondition waits until obj's condition typ has status, and reason unless reason is "",
// for obj's current generation, and leaves obj as it was then read. obj names the object.
func (s *Scenario) WaitCondition(obj Conditioned, typ string, status metav1.ConditionStatus, reason string) {
	s.t.Helper()
	s.Eventually(func(g gomega.Gomega) {
		g.Expect(s.Get(obj)).To(gomega.Succeed())
		g.Expect(conditionMet(obj, typ, status, reason)).To(gomega.Succeed())
	})
}

// conditionMet says how obj's condition typ falls short of status and reason (any reason
// when ""), or returns nil. A condition written for an earlier generation falls short
// whatever it says: it describes a spec that is gone.
func conditionMet(obj Conditioned, typ string, status metav1.ConditionStatus, reason string) error {
	c := apimeta.FindStatusCondition(obj.GetConditions(), typ)
	switch {
	case c == nil:
		return fmt.Errorf("no %s condition; conditions: %v", typ, obj.GetConditions())
	case c.ObservedGeneration != obj.GetGeneration():
		return fmt.Errorf("condition %s is for generation %d, not %d: %s %s: %s", typ, c.ObservedGeneration, obj.GetGeneration(), c.Status, c.Reason, c.Message)
	case c.Status != status:
		return fmt.Errorf("condition %s is %s, not %s: %s: %s", typ, c.Status, status, c.Reason, c.Message)
	case reason != "" && c.Reason != reason:
		return fmt.Errorf("condition %s has reason %s, not %s: %s", typ, c.Reason, reason, c.Message)
	}
	return nil
}

// WaitGone waits until obj is deleted (its finalizers released).
func (s *Scenario) WaitGone(obj client.Object) {
	s.t.Helper()
	s.Eventually(func(g gomega.Gomega) {
		err := s.Get(obj.DeepCopyObject().(client.Object))
		g.Expect(apierrors.IsNotFound(err)).To(gomega.BeTrue(), "%T %s still exists: %v", obj, obj.GetName(), err)
	})
}

// WaitEvent waits for an events.k8s.io Event of eventType and reason about obj.
func (s *Scenario) WaitEvent(obj client.Object, eventType, reason string) {
	s.t.Helper()
	gvk, err := apiutil.GVKForObject(obj, s.env.Scheme)
	if err != nil {
		s.t.Fatalf("failed to find the kind of %T: %v", obj, err)
	}
	s.Eventually(func(g gomega.Gomega) {
		var list eventsv1.EventList
		g.Expect(s.env.Client.List(s.t.Context(), &list, client.InNamespace(s.Namespace))).To(gomega.Succeed())
		var about []string
		for _, e := range list.Items {
			if e.Regarding.Kind == gvk.Kind && e.Regarding.Name == obj.GetName() {
				about = append(about, e.Type+" "+e.Reason)
			}
		}
		g.Expect(about).To(gomega.ContainElement(eventType+" "+reason), "events about %s %s", gvk.Kind, obj.GetName())
	})
}
