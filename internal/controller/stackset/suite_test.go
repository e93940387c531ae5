package stackset_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/controller/stackset"
	"github.com/stackwright/stackwright/internal/source/git"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// One real manager running the StackSet controller alone serves every test of the package;
// each test works in its own namespace. No Stack controller runs: the tests write the
// Stacks' status as it would (Ready for their generation) and, where a Stack must linger
// while it is deleted, hold it with a finalizer of their own. The git generators list real
// repositories served by internal/testing/gitserver, through the manager's git source.
var (
	env *kubetest.Env
	// recorder receives every event the package's controller emits.
	recorder *kubetest.Recorder[*v1alpha1.StackSet]
)

// maxElements is the package's --max-stackset-elements: small, so that a test can exceed it.
const maxElements = 20

func TestMain(m *testing.M) { kubetest.Main(m, &env, kubetest.Manager(setupManager)) }

func setupManager(ctx context.Context, e *kubetest.Env, dir string) (ctrl.Manager, error) {
	mgr, err := e.NewManager(ctrl.Options{})
	if err != nil {
		return nil, err
	}
	store, err := artifact.NewStore(filepath.Join(dir, "artifacts"))
	if err != nil {
		return nil, err
	}
	source := &git.Resolver{Client: mgr.GetClient(), Store: store, Cache: git.NewCacheWithLimits(filepath.Join(dir, "git"), git.DefaultCacheLimits)}
	recorder = kubetest.NewRecorder(e.Client, announced)
	r := &stackset.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Git: source, Recorder: recorder, MaxElements: maxElements}
	if err := r.SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
		return nil, fmt.Errorf("failed to set up StackSet controller: %w", err)
	}
	return mgr, nil
}

// announced says what e, emitted by a reconcile of sent (at the generation it then had),
// announces that the stored set's status does not show; nil when it shows all of it.
//
// A Stack created or removed is announced by the status of the reconcile that did it: a
// status written for gen (a condition of that generation or a later one), or, for a set
// being deleted with the Destroy policy, one that says it waits for its Stacks. Held
// removals are announced by the Stalled condition that holds them, word for word.
func announced(e kubetest.Event, sent, set *v1alpha1.StackSet) error {
	gen := sent.Generation
	written := slices.ContainsFunc(set.Status.Conditions, func(c metav1.Condition) bool { return c.ObservedGeneration >= gen })
	var ok bool
	switch e.Reason {
	case stackset.EventStackCreated:
		ok = written && set.Status.Elements > 0
	case stackset.EventStackDeleted, stackset.EventStackOrphaned:
		if set.DeletionTimestamp.IsZero() {
			ok = written
			break
		}
		c := apimeta.FindStatusCondition(set.Status.Conditions, pulumiv1.ConditionReconciling)
		ok = set.Spec.DeletionPolicy != v1alpha1.StackSetDestroy || c != nil && c.Reason == pulumiv1.ReasonDestroyInProgress
	case stackset.EventRemovalsHeld:
		c := apimeta.FindStatusCondition(set.Status.Conditions, pulumiv1.ConditionStalled)
		ok = c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonRemovalsHeld && c.Message == e.Message
	default:
		return errors.New("a reason this test does not know: say what its status shows")
	}
	if !ok {
		return fmt.Errorf("%q emitted before its status was written (generation %d; conditions %v)", e.Message, gen, set.Status.Conditions)
	}
	return nil
}

// scenario is one test's namespace and the sets it creates there. It plays the Stack
// controller: the Stacks' status says what it would.
type scenario struct {
	*kubetest.Scenario
	t *testing.T
	g *WithT
}

func newScenario(t *testing.T) *scenario {
	t.Helper()
	s := &scenario{Scenario: env.Scenario(t), t: t, g: NewWithT(t)}
	recorder.CheckOnCleanup(t, s.Namespace)
	return s
}

// template is a StackSet template spec: spec as JSON, placeholders and all.
func template(t *testing.T, spec map[string]any) apiextensionsv1.JSON {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return apiextensionsv1.JSON{Raw: raw}
}

// listElements are list elements of the names, each with the value tier=t-<name>.
func listElements(names ...string) []v1alpha1.ListElement {
	out := make([]v1alpha1.ListElement, 0, len(names))
	for _, n := range names {
		out = append(out, v1alpha1.ListElement{Name: n, Values: map[string]string{"tier": "t-" + n}})
	}
	return out
}

// listSet is a set named name of a list of the names, whose Stacks run the Program env.
func (s *scenario) listSet(name string, names ...string) *v1alpha1.StackSet {
	return &v1alpha1.StackSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.StackSetSpec{
			Generator: v1alpha1.StackSetGenerator{List: &v1alpha1.ListGenerator{Elements: listElements(names...)}},
			Template:  v1alpha1.StackSetTemplate{Spec: template(s.t, map[string]any{"stack": "{{name}}-{{values.tier}}", "programRef": map[string]any{"name": "env"}})},
		},
	}
}

// heldSet creates the list set envs of dev, qa, stage and prod, whose spec.maxRemovals is
// 1, waits until it is Ready, then drops every element but dev and waits until the set
// holds the three removals. It returns the set, its Stacks by element as they were when it
// was Ready, and its Stalled condition.
func (s *scenario) heldSet() (*v1alpha1.StackSet, map[string]pulumiv1.Stack, *metav1.Condition) {
	s.t.Helper()
	set := s.listSet("envs", "dev", "qa", "stage", "prod")
	bound := intstr.FromInt32(1)
	set.Spec.MaxRemovals = &bound
	s.Create(set)
	stacks := s.waitReady(set, "dev", "qa", "stage", "prod")
	s.update(set, func(spec *v1alpha1.StackSetSpec) { spec.Generator.List.Elements = listElements("dev") })
	return set, stacks, s.stalled(set, v1alpha1.ReasonRemovalsHeld)
}

// set reads the set.
func (s *scenario) set(g Gomega, set *v1alpha1.StackSet) *v1alpha1.StackSet {
	got := &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Name: set.Name}}
	g.Expect(s.Get(got)).To(Succeed())
	return got
}

// update applies mutate to the set's spec, retrying on conflicts.
func (s *scenario) update(set *v1alpha1.StackSet, mutate func(spec *v1alpha1.StackSetSpec)) {
	s.t.Helper()
	s.g.Eventually(func() error {
		cur := &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Name: set.Name}}
		if err := s.Get(cur); err != nil {
			return err
		}
		mutate(&cur.Spec)
		return env.Client.Update(s.t.Context(), cur)
	}).Should(Succeed(), "update of StackSet %s", set.Name)
}

// stacks returns the set's Stacks, those being deleted included, by the element they
// stand for.
func (s *scenario) stacks(g Gomega, set *v1alpha1.StackSet) map[string]pulumiv1.Stack {
	var list pulumiv1.StackList
	g.Expect(env.Client.List(s.t.Context(), &list, client.InNamespace(s.Namespace), client.MatchingLabels{v1alpha1.StackSetLabel: set.Name})).To(Succeed())
	out := map[string]pulumiv1.Stack{}
	for _, st := range list.Items {
		out[st.Annotations[v1alpha1.StackSetElementAnnotation]] = st
	}
	return out
}

// live returns the set's Stacks not being deleted, by element.
func (s *scenario) live(g Gomega, set *v1alpha1.StackSet) map[string]pulumiv1.Stack {
	out := s.stacks(g, set)
	maps.DeleteFunc(out, func(_ string, st pulumiv1.Stack) bool { return !st.DeletionTimestamp.IsZero() })
	return out
}

// waitReady waits until the set has exactly the elements want, each with its Stack, marks
// those Stacks Ready (as the Stack controller would once they deployed) and waits until
// the set is Ready. It returns the Stacks by element.
func (s *scenario) waitReady(set *v1alpha1.StackSet, want ...string) map[string]pulumiv1.Stack {
	s.t.Helper()
	var stacks map[string]pulumiv1.Stack
	s.Eventually(func(g Gomega) {
		stacks = s.live(g, set)
		g.Expect(slices.Sorted(maps.Keys(stacks))).To(ConsistOf(want), "the set's Stacks")
	})
	for _, st := range stacks {
		s.ready(st.Name)
	}
	s.WaitCondition(set, pulumiv1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonStacksReady)
	return stacks
}

// ready records that the Stack name deployed its current generation and is Ready.
func (s *scenario) ready(name string) {
	s.t.Helper()
	s.setReady(name, metav1.ConditionTrue)
}

// setReady sets the Ready condition of the Stack name for its current generation.
func (s *scenario) setReady(name string, status metav1.ConditionStatus) {
	s.t.Helper()
	s.g.Eventually(func() error {
		st := &pulumiv1.Stack{}
		if err := env.Client.Get(s.t.Context(), client.ObjectKey{Namespace: s.Namespace, Name: name}, st); err != nil {
			return err
		}
		base := st.DeepCopy()
		st.Status.ObservedGeneration = st.Generation
		apimeta.SetStatusCondition(&st.Status.Conditions, metav1.Condition{
			Type: pulumiv1.ConditionReady, Status: status, Reason: pulumiv1.ReasonProcessingCompleted, Message: "as the test says", ObservedGeneration: st.Generation,
		})
		return env.Client.Status().Patch(s.t.Context(), st, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	}).Should(Succeed(), "status of Stack %s", name)
}

// hold adds a finalizer of the test's to the Stack name, so that it lingers once deleted
// (the Stack controller's would, while it destroys), and releases it when the test ends.
func (s *scenario) hold(name string) {
	s.t.Helper()
	const finalizer = "test.stackwright.dev/hold"
	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: name}}
	s.g.Expect(s.Get(st)).To(Succeed())
	s.Patch(st, func() { st.Finalizers = append(st.Finalizers, finalizer) })
	s.t.Cleanup(func() { s.release(name) })
}

// release removes the test's finalizer from the Stack name, if it is still there.
func (s *scenario) release(name string) {
	s.t.Helper()
	s.g.Eventually(func() error {
		st := &pulumiv1.Stack{}
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: s.Namespace, Name: name}, st)
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		base := st.DeepCopy()
		st.Finalizers = slices.DeleteFunc(st.Finalizers, func(f string) bool { return f == "test.stackwright.dev/hold" })
		return env.Client.Patch(context.Background(), st, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	}).Should(Succeed(), "release of Stack %s", name)
}

// stalled waits until the set is Stalled for reason at its generation, and returns its
// Stalled condition.
func (s *scenario) stalled(set *v1alpha1.StackSet, reason string) *metav1.Condition {
	s.t.Helper()
	got := &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Name: set.Name}}
	s.WaitCondition(got, pulumiv1.ConditionStalled, metav1.ConditionTrue, reason)
	return apimeta.FindStatusCondition(got.Status.Conditions, pulumiv1.ConditionStalled)
}
