package patch_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

// newStack creates a Stack and returns it as a reconcile would read it.
func newStack(t *testing.T) *pulumiv1.Stack {
	t.Helper()
	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: env.Namespace(t)},
		Spec:       pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "p"}},
	}
	if err := env.Client.Create(t.Context(), s); err != nil {
		t.Fatalf("failed to create Stack: %v", err)
	}
	return s
}

func get(t *testing.T, s *pulumiv1.Stack) *pulumiv1.Stack {
	t.Helper()
	got := &pulumiv1.Stack{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(s), got); err != nil {
		t.Fatalf("failed to get Stack: %v", err)
	}
	return got
}

func TestPatcher_Status_WritesOnlyChanges(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStack(t)
	p := patch.New(env.Client, s, "Stack", "test")

	rv := s.ResourceVersion
	if err := p.Status(ctx, s); err != nil {
		t.Fatalf("unchanged status: %v", err)
	}
	if got := get(t, s).ResourceVersion; got != rv {
		t.Errorf("an unchanged status was written: resourceVersion %s → %s", rv, got)
	}

	s.Status.ObservedReconcileRequest = "r1"
	if err := p.Status(ctx, s); err != nil {
		t.Fatalf("changed status: %v", err)
	}
	stored := get(t, s)
	if diff := cmp.Diff("r1", stored.Status.ObservedReconcileRequest); diff != "" {
		t.Errorf("stored status (-want +got):\n%s", diff)
	}
	if s.ResourceVersion != stored.ResourceVersion {
		t.Errorf("in-memory resourceVersion %s, stored %s", s.ResourceVersion, stored.ResourceVersion)
	}

	// A second change is patched against the first: only the new field is sent, so a
	// locked write right after succeeds.
	s.Status.ObservedGeneration = 7
	if err := p.Status(ctx, s, patch.WithOptimisticLock()); err != nil {
		t.Fatalf("locked write after own write: %v", err)
	}
	if got := get(t, s).Status; got.ObservedGeneration != 7 || got.ObservedReconcileRequest != "r1" {
		t.Errorf("stored status = %+v; want both writes", got)
	}
}

func TestPatcher_Status_LockedWriteOnStaleCopyIsRefusedForGood(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStack(t)
	p := patch.New(env.Client, s, "Stack", "test")

	// Someone else records an intent after our read.
	other := get(t, s)
	other.Status.ObservedReconcileRequest = "theirs"
	if err := env.Client.Status().Update(ctx, other); err != nil {
		t.Fatalf("concurrent write: %v", err)
	}

	s.Status.ObservedReconcileRequest = "ours"
	err := p.Status(ctx, s, patch.WithOptimisticLock())
	if !apierrors.IsConflict(err) {
		t.Fatalf("locked write on a stale copy: err = %v; want a conflict", err)
	}
	// The reconcile's closing write must not overwrite it either.
	if err := p.Status(ctx, s); !apierrors.IsConflict(err) {
		t.Errorf("write after a refused locked write: err = %v; want the conflict again", err)
	}
	if got := get(t, s).Status.ObservedReconcileRequest; got != "theirs" {
		t.Errorf("stored observedReconcileRequest = %q; want the concurrent writer's", got)
	}
}

func TestPatcher_Finalizers_NeverDropsAFinalizerAddedMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStack(t)
	p := patch.New(env.Client, s, "Stack", "test")

	other := get(t, s)
	other.Finalizers = append(other.Finalizers, "example.com/other")
	if err := env.Client.Update(ctx, other); err != nil {
		t.Fatalf("concurrent finalizer: %v", err)
	}

	s.Finalizers = append(s.Finalizers, pulumiv1.StackFinalizer)
	if err := p.Finalizers(ctx, s); !apierrors.IsConflict(err) {
		t.Fatalf("finalizer write on a stale copy: err = %v; want a conflict", err)
	}
	if diff := cmp.Diff([]string{"example.com/other"}, get(t, s).Finalizers); diff != "" {
		t.Errorf("stored finalizers (-want +got):\n%s", diff)
	}

	// Read again, as the retried reconcile would: both finalizers are kept.
	s = get(t, s)
	p = patch.New(env.Client, s, "Stack", "test")
	s.Finalizers = append(s.Finalizers, pulumiv1.StackFinalizer)
	if err := p.Finalizers(ctx, s); err != nil {
		t.Fatalf("finalizer write: %v", err)
	}
	if diff := cmp.Diff([]string{"example.com/other", pulumiv1.StackFinalizer}, get(t, s).Finalizers); diff != "" {
		t.Errorf("stored finalizers (-want +got):\n%s", diff)
	}
	// Finalizers stay as written when a status write follows.
	s.Status.ObservedReconcileRequest = "r"
	if err := p.Status(ctx, s); err != nil {
		t.Fatalf("status after finalizers: %v", err)
	}
	if diff := cmp.Diff([]string{"example.com/other", pulumiv1.StackFinalizer}, get(t, s).Finalizers); diff != "" {
		t.Errorf("stored finalizers after status write (-want +got):\n%s", diff)
	}
}
