package stack

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/crashpoint"
)

// prune prunes the Stack's Update history once per reconcile (a finished Update and the
// idle Stack it leaves would otherwise list the history twice) and asks to look again when
// the next kept Update ages out. A failure to prune is logged: it never holds a Stack up.
func (r *Reconciler) prune(ctx context.Context, s *scope) {
	if s.pruned {
		return
	}
	s.pruned = true
	expires, err := r.pruneUpdates(ctx, s.stack)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to prune Update history")
		return
	}
	s.requeueAfter(expires)
}

// pruneUpdates keeps the newest finished Updates of a Stack (UpdateHistory of them) that are
// younger than UpdateMaxAge, and deletes the rest with their outputs Secrets. The Updates
// the status names are always kept: they are the record of what is deployed, what runs and
// what the last drift check saw. It returns how long until the oldest Update it kept ages
// out (0: none will), so that an idle Stack is looked at again to prune it.
func (r *Reconciler) pruneUpdates(ctx context.Context, stack *pulumiv1.Stack) (time.Duration, error) {
	maxAge := r.Options.UpdateMaxAge
	// PKO's updateTemplate.spec.ttlAfterCompleted shortens the Stack's own retention.
	if ttl, _ := updateTTL(&stack.Spec); ttl > 0 && (maxAge <= 0 || ttl < maxAge) {
		maxAge = ttl
	}
	if r.Options.UpdateHistory <= 0 && maxAge <= 0 {
		return 0, nil
	}
	var list v1alpha1.UpdateList
	if err := r.Client.List(ctx, &list, client.InNamespace(stack.Namespace), client.MatchingFields{IndexUpdateStack: stack.Name}); err != nil {
		return 0, fmt.Errorf("failed to list Updates of Stack %s: %w", stack.Name, err)
	}
	keep := map[string]bool{}
	if lu := stack.Status.LastUpdate; lu != nil {
		keep[lu.Name] = true
	}
	if cu := stack.Status.CurrentUpdate; cu != nil {
		keep[cu.Name] = true
	}
	if d := stack.Status.DriftDetection; d != nil && d.LastUpdate != "" {
		keep[d.LastUpdate] = true
	}
	// An approval preview holds the plan its approved up is held to.
	if sw := stack.Status.Stackwright; sw != nil && sw.Approval != nil {
		keep[sw.Approval.Preview] = true
	}
	// The next up corrects their records if it finds their runs complete.
	if sw := stack.Status.Stackwright; sw != nil {
		for _, name := range sw.LostUpdates {
			keep[name] = true
		}
	}
	// The published outputs are put back from this Update's outputs when edited by hand.
	if e := stack.Status.OutputsExport; e != nil && e.Update != "" {
		keep[e.Update] = true
	}
	var finished []*v1alpha1.Update
	for i := range list.Items {
		u := &list.Items[i]
		if u.Status.Finished() && !keep[u.Name] && metav1.IsControlledBy(u, stack) {
			finished = append(finished, u)
		}
	}
	sort.Slice(finished, func(i, j int) bool {
		return finished[j].CreationTimestamp.Before(&finished[i].CreationTimestamp)
	})
	limit := len(finished)
	if r.Options.UpdateHistory > 0 {
		limit = min(limit, max(r.Options.UpdateHistory-len(keep), 0))
	}
	var next time.Duration
	for i, u := range finished {
		left := time.Duration(0)
		if maxAge > 0 {
			left = maxAge - r.Now().Sub(finishedAt(u))
		}
		if i < limit && (maxAge <= 0 || left > 0) {
			next = minPositive(next, left)
			continue
		}
		if err := r.deleteUpdate(ctx, u); err != nil {
			return 0, err
		}
	}
	return next, nil
}

// finishedAt is when an Update finished, or was created when it never says.
func finishedAt(u *v1alpha1.Update) time.Time {
	if u.Status.EndTime != nil {
		return u.Status.EndTime.Time
	}
	return u.CreationTimestamp.Time
}

// deleteUpdate deletes an Update and its outputs Secret.
func (r *Reconciler) deleteUpdate(ctx context.Context, u *v1alpha1.Update) error {
	if err := r.Client.Delete(ctx, u); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete Update %s: %w", u.Name, err)
	}
	// Owned by the Update, so garbage collection would get them too; deleting them now
	// keeps outputs and plans from outliving their record when no collector runs.
	for _, name := range []string{u.Status.OutputsSecretName, u.Status.PlanSecretName} {
		if name == "" {
			continue
		}
		sec := &corev1.Secret{}
		sec.Namespace, sec.Name = u.Namespace, name
		if err := r.Client.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete Secret %s of Update %s: %w", name, u.Name, err)
		}
	}
	crashpoint.Hit(crashpoint.StackUpdatesPruned)
	return nil
}
