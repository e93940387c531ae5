package stack

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/stack/decide"
)

// prerequisiteRequeue is how often a Stack waiting on its prerequisites looks again when
// no event may announce the change (a prerequisite asked to run again may take its time).
const prerequisiteRequeue = 30 * time.Second

// awaitPrerequisites holds an update back until every prerequisite (PKO's
// spec.prerequisites: Stacks of the same namespace) has succeeded, recently enough when
// the requirement says so. A prerequisite whose success is too old is asked to run again,
// as PKO does, through its reconciliation-request annotation. A Stack that waits says on
// what in its conditions. Destroys and resumed Updates wait for nothing.
func (r *Reconciler) awaitPrerequisites(ctx context.Context, s *scope) (bool, error) {
	stack := s.stack
	if len(stack.Spec.Prerequisites) == 0 || s.next.Action != decide.Run || s.resume != "" || s.op == v1alpha1.UpdateTypeDestroy {
		return true, nil
	}
	if cycle, err := r.prerequisiteCycle(ctx, stack); err != nil {
		return false, err
	} else if cycle != nil {
		markStalled(stack, pulumiv1.ReasonSpecInvalid, "spec.prerequisites form a cycle: "+strings.Join(cycle, " → ")+"; none of these Stacks can ever be updated")
		return false, nil
	}
	var waiting []string
	for _, pr := range stack.Spec.Prerequisites {
		why, err := r.prerequisiteUnsatisfied(ctx, stack, pr)
		if err != nil {
			return false, err
		}
		if why != "" {
			waiting = append(waiting, why)
		}
	}
	if len(waiting) == 0 {
		return true, nil
	}
	markReconciling(stack, pulumiv1.ReasonPrerequisiteNotSatisfied, "waiting for prerequisites: "+strings.Join(waiting, "; "))
	s.requeueAfter(prerequisiteRequeue)
	return false, nil
}

// prerequisiteUnsatisfied says why pr does not let stack be updated yet ("" when it does).
func (r *Reconciler) prerequisiteUnsatisfied(ctx context.Context, stack *pulumiv1.Stack, pr pulumiv1.PrerequisiteRef) (string, error) {
	var pre pulumiv1.Stack
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: pr.Name}, &pre); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("Stack %s does not exist", pr.Name), nil
		}
		return "", fmt.Errorf("failed to get prerequisite Stack %s/%s: %w", stack.Namespace, pr.Name, err)
	}
	lu := pre.Status.LastUpdate
	if lu == nil || lu.State != pulumiv1.UpdateStateSucceeded {
		if isStalled(&pre) {
			return fmt.Sprintf("Stack %s is stalled and needs a human: %s", pr.Name, conditionMessage(&pre, pulumiv1.ConditionStalled)), nil
		}
		return fmt.Sprintf("Stack %s has not succeeded yet", pr.Name), nil
	}
	// A malformed duration never gets here: Review stalls the Stack before its phases run.
	within, _ := pr.SucceededWithin()
	if within == 0 || lu.LastResyncTime == nil {
		return "", nil
	}
	age := r.Now().Sub(lu.LastResyncTime.Time)
	if age <= within {
		return "", nil
	}
	if err := r.requestRerun(ctx, &pre); err != nil {
		return "", err
	}
	return fmt.Sprintf("Stack %s last succeeded %s ago, more than %s: asked it to run again", pr.Name, age.Round(time.Second), within), nil
}

// requestRerun asks a prerequisite to run again, as PKO does, with a new value of its
// reconciliation-request annotation, unless a request of it is still pending (so that
// waiting dependents do not keep restarting it).
func (r *Reconciler) requestRerun(ctx context.Context, pre *pulumiv1.Stack) error {
	if pre.ReconcileRequested() {
		return nil
	}
	base := pre.DeepCopy()
	if pre.Annotations == nil {
		pre.Annotations = map[string]string{}
	}
	pre.Annotations[pulumiv1.ReconcileRequestAnnotation] = r.Now().UTC().Format(time.RFC3339Nano)
	if err := r.Client.Patch(ctx, pre, client.MergeFrom(base), client.FieldOwner(fieldManager)); err != nil {
		return fmt.Errorf("failed to request a run of prerequisite Stack %s/%s: %w", pre.Namespace, pre.Name, err)
	}
	return nil
}

// prerequisiteCycle returns the path of a cycle through stack's prerequisites that comes
// back to stack, or nil. Prerequisites that do not exist end a path.
func (r *Reconciler) prerequisiteCycle(ctx context.Context, stack *pulumiv1.Stack) ([]string, error) {
	seen := map[string]bool{}
	var walk func(name string, path []string, prereqs []pulumiv1.PrerequisiteRef) ([]string, error)
	walk = func(name string, path []string, prereqs []pulumiv1.PrerequisiteRef) ([]string, error) {
		path = append(path, name)
		for _, pr := range prereqs {
			if pr.Name == stack.Name {
				return append(path, pr.Name), nil
			}
			if seen[pr.Name] {
				continue
			}
			seen[pr.Name] = true
			var next pulumiv1.Stack
			if err := r.Client.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: pr.Name}, &next); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("failed to get prerequisite Stack %s/%s: %w", stack.Namespace, pr.Name, err)
			}
			if cycle, err := walk(pr.Name, path, next.Spec.Prerequisites); cycle != nil || err != nil {
				return cycle, err
			}
		}
		return nil, nil
	}
	return walk(stack.Name, nil, stack.Spec.Prerequisites)
}

// prerequisiteNames is what IndexPrerequisites holds for a Stack.
func prerequisiteNames(spec *pulumiv1.StackSpec) []string {
	names := make([]string, 0, len(spec.Prerequisites))
	for _, pr := range spec.Prerequisites {
		names = append(names, pr.Name)
	}
	return dedupe(names)
}

func conditionMessage(s *pulumiv1.Stack, typ string) string {
	if c := conditions.Get(s, typ); c != nil {
		return c.Message
	}
	return ""
}
