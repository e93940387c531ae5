package stacktemplate

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// ensureRevision keeps the template's current spec as the StackTemplateRevision of its
// generation, then announces the generation as the latest revision: instances are
// rendered from revisions, never from the template itself. A revision is immutable, so
// one that exists is the right one unless it belongs to something else.
func (r *Reconciler) ensureRevision(ctx context.Context, s *scope) (bool, error) {
	t := s.template
	if err := r.keepRevision(ctx, t); err != nil {
		return false, err
	}
	t.Status.Revision = t.Generation
	return true, nil
}

// keepRevision creates the StackTemplateRevision of t's generation unless it exists.
func (r *Reconciler) keepRevision(ctx context.Context, t *v1alpha1.StackTemplate) error {
	want := &v1alpha1.StackTemplateRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:   v1alpha1.RevisionName(t.Name, t.Generation),
			Labels: map[string]string{v1alpha1.TemplateLabel: t.Name},
		},
		Spec: t.Snapshot(t.Generation),
	}
	if err := controllerutil.SetControllerReference(t, want, r.Client.Scheme()); err != nil {
		return fmt.Errorf("failed to own StackTemplateRevision %s: %w", want.Name, err)
	}
	got := &v1alpha1.StackTemplateRevision{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), got)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want, client.FieldOwner(FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create StackTemplateRevision %s: %w", want.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("failed to get StackTemplateRevision %s: %w", want.Name, err)
	case !metav1.IsControlledBy(got, t) || !sameRevision(got.Spec, want.Spec):
		// Another template's of this name, since deleted and created again: revisions
		// are owned, so the old one goes with its template (the garbage collector) soon.
		return fmt.Errorf("failed to keep revision %d: StackTemplateRevision %s exists and is not this template's", t.Generation, want.Name)
	}
	return nil
}

// sameRevision reports whether the revision got is want. One made by a manager that did
// not record parametersVersion yet is the same: its instances were read in the one version
// the template had.
func sameRevision(got, want v1alpha1.StackTemplateRevisionSpec) bool {
	if got.ParametersVersion == "" {
		got.ParametersVersion = want.ParametersVersion
	}
	return apiequality.Semantic.DeepEqual(got, want)
}

// observeRevisions counts the instances whose Stack runs an older revision than the
// latest, and deletes the template's revisions older than any of them runs, or than the
// stable revision of a rollout of the template's revisions (its Stacks return to it on
// abort). Those in between stay, so that a held instance may be opened to any revision
// after its own.
func (r *Reconciler) observeRevisions(ctx context.Context, s *scope) (bool, error) {
	t := s.template
	var stacks pulumiv1.StackList
	if err := r.Client.List(ctx, &stacks, client.InNamespace(t.Spec.Namespace), client.MatchingLabels{v1alpha1.TemplateLabel: t.Name}); err != nil {
		return false, fmt.Errorf("failed to list Stacks of StackTemplate %s: %w", t.Name, err)
	}
	oldest := t.Status.Revision
	t.Status.InstancesBehind = 0
	for _, st := range stacks.Items {
		// A Stack that only previews a revision for a rollout returns to the one it has.
		rev := v1alpha1.HeldTemplateRevision(st.Labels, st.Annotations)
		if rev <= 0 || rev >= t.Status.Revision {
			continue
		}
		oldest = min(oldest, rev)
		if st.Labels[v1alpha1.TemplateStackLabel] == "" {
			// An instance counts once, by the Stack of spec.stack, however many it has.
			t.Status.InstancesBehind++
		}
	}
	var rollouts v1alpha1.StackRolloutList
	if err := r.Client.List(ctx, &rollouts, client.InNamespace(t.Spec.Namespace)); err != nil {
		return false, fmt.Errorf("failed to list StackRollouts of StackTemplate %s: %w", t.Name, err)
	}
	for i := range rollouts.Items {
		ro := &rollouts.Items[i]
		if rev := v1alpha1.TemplateRevision(ro.Status.Stable); ro.RollsOutTemplate(t.Name) && rev > 0 {
			oldest = min(oldest, rev)
		}
	}
	var revs v1alpha1.StackTemplateRevisionList
	if err := r.Client.List(ctx, &revs, client.MatchingLabels{v1alpha1.TemplateLabel: t.Name}); err != nil {
		return false, fmt.Errorf("failed to list StackTemplateRevisions of %s: %w", t.Name, err)
	}
	for i := range revs.Items {
		rev := &revs.Items[i]
		if rev.Spec.Revision >= oldest || !metav1.IsControlledBy(rev, t) {
			continue
		}
		if err := r.Client.Delete(ctx, rev); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("failed to delete StackTemplateRevision %s: %w", rev.Name, err)
		}
	}
	return true, nil
}
