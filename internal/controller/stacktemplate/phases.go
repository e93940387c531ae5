package stacktemplate

import (
	"context"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The phases of a reconcile, in the order they run. Each either proceeds or ends the
// reconcile with the template's conditions saying why.

// checkGroup stalls a template of an API group this install does not serve.
func (r *Reconciler) checkGroup(_ context.Context, s *scope) (bool, error) {
	if !slices.Contains(r.AllowedGroups, s.template.Spec.API.Group) {
		markGroupNotAllowed(s.template, r.AllowedGroups)
		return false, nil
	}
	return true, nil
}

// checkSpec stalls a template whose Stacks, objects or parameters cannot be used as
// written, before anything is installed for it.
func (r *Reconciler) checkSpec(_ context.Context, s *scope) (bool, error) {
	if _, err := StackSpec(s.template); err != nil {
		markInvalid(s.template, err.Error())
		return false, nil
	}
	if err := checkComposition(s.template); err != nil {
		markInvalid(s.template, err.Error())
		return false, nil
	}
	if err := checkObjectKinds(s.template, r.ObjectKinds); err != nil {
		markObjectKindNotAllowed(s.template, r.ObjectKinds, err)
		return false, nil
	}
	want, err := definition(s.template)
	if err != nil {
		markInvalid(s.template, err.Error())
		return false, nil
	}
	if s.template.RenamesParameters() {
		if r.Conversion == nil {
			markConversionUnavailable(s.template)
			return false, nil
		}
		want.Spec.Conversion = webhookConversion(r.Conversion, s.template.Name)
	}
	s.want = want
	return true, nil
}

// applyDefinition creates the kind's CustomResourceDefinition, or brings the one it created
// earlier to the one wanted. The template is Stalled by a definition of that name that is
// not this template's, or one the API server refuses.
func (r *Reconciler) applyDefinition(ctx context.Context, s *scope) (bool, error) {
	t, want := s.template, s.want
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: want.Name}, crd)
	switch {
	case apierrors.IsNotFound(err):
		// The cache holds only the definitions templates made: another of that name shows
		// as not found here, and as existing to the create.
		err := r.Client.Create(ctx, want, client.FieldOwner(FieldManager))
		if apierrors.IsAlreadyExists(err) {
			if err := r.APIReader.Get(ctx, client.ObjectKey{Name: want.Name}, crd); err != nil {
				return false, fmt.Errorf("failed to get CustomResourceDefinition %s: %w", want.Name, err)
			}
			if crd.Labels[v1alpha1.TemplateLabel] == t.Name {
				// This template's, made moments ago: the cache has not seen it yet.
				return false, fmt.Errorf("failed to read CustomResourceDefinition %s: not in the cache yet", want.Name)
			}
			markDefinitionConflict(t, want.Name)
			return false, nil
		}
		if err != nil {
			return false, refused(t, want, err)
		}
		crd = want
	case err != nil:
		return false, fmt.Errorf("failed to get CustomResourceDefinition %s: %w", want.Name, err)
	case crd.Labels[v1alpha1.TemplateLabel] != t.Name:
		markDefinitionConflict(t, want.Name)
		return false, nil
	case !apiequality.Semantic.DeepEqual(crd.Spec, want.Spec):
		crd.Spec = want.Spec
		if err := r.Client.Update(ctx, crd, client.FieldOwner(FieldManager)); err != nil {
			return false, refused(t, want, err)
		}
	}
	s.crd = crd
	t.Status.CustomResourceDefinition = crd.Name
	return true, nil
}

// refused turns the API server's refusal of a definition into a Stalled template, and any
// other failure into an error to retry.
func refused(t *v1alpha1.StackTemplate, want *apiextensionsv1.CustomResourceDefinition, err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		markDefinitionRefused(t, want.Name, err)
		return nil
	}
	return fmt.Errorf("failed to write CustomResourceDefinition %s: %w", want.Name, err)
}

// awaitEstablished waits for the API server to serve the definition; its watch brings the
// template back when it does.
func (r *Reconciler) awaitEstablished(_ context.Context, s *scope) (bool, error) {
	if !established(s.crd) {
		markEstablishing(s.template, s.crd.Name)
		return false, nil
	}
	return true, nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// migrateStorage rewrites the instances still stored in a version other than the storage
// one, and then has the definition forget those versions (status.storedVersions), so that
// a version no instance is stored in may later be dropped. An update that changes nothing
// is written again in the storage version, as the storage version migrator does it; the
// instances' content, and so their Stacks, do not change.
func (r *Reconciler) migrateStorage(ctx context.Context, s *scope) (bool, error) {
	crd, storage := s.crd, s.template.StorageVersion()
	if slices.Equal(crd.Status.StoredVersions, []string{storage}) {
		return true, nil
	}
	list, err := listInstances(ctx, r.APIReader, s.template)
	if err != nil {
		return false, err
	}
	for i := range list.Items {
		item := &list.Items[i]
		if err := r.Client.Update(ctx, item, client.FieldOwner(FieldManager)); client.IgnoreNotFound(err) != nil {
			// A conflict is a tenant's write, which stored it in the storage version.
			if !apierrors.IsConflict(err) {
				return false, fmt.Errorf("failed to rewrite %s %s/%s in version %s: %w", item.GetKind(), item.GetNamespace(), item.GetName(), storage, err)
			}
		}
	}
	migrated := crd.DeepCopy()
	migrated.Status.StoredVersions = []string{storage}
	if err := r.Client.Status().Update(ctx, migrated, client.FieldOwner(FieldManager)); err != nil {
		return false, fmt.Errorf("failed to record the stored versions of CustomResourceDefinition %s: %w", crd.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Migrated instances to the storage version", "definition", crd.Name, "from", crd.Status.StoredVersions, "to", storage, "instances", len(list.Items))
	s.crd = migrated
	return true, nil
}

// serve has the instance controller reconcile the kind's instances.
func (r *Reconciler) serve(ctx context.Context, s *scope) (bool, error) {
	if err := r.Instances.Serve(ctx, s.template.Name, s.template.GVK()); err != nil {
		return false, fmt.Errorf("failed to serve %s: %w", s.template.GVK(), err)
	}
	return true, nil
}

// countInstances records how many instances the kind has.
func (r *Reconciler) countInstances(ctx context.Context, s *scope) (bool, error) {
	list, err := listInstances(ctx, r.Client, s.template)
	if err != nil {
		return false, err
	}
	s.template.Status.Instances = int32(len(list.Items))
	return true, nil
}

func listInstances(ctx context.Context, c client.Reader, t *v1alpha1.StackTemplate) (*unstructured.UnstructuredList, error) {
	list := &unstructured.UnstructuredList{}
	gvk := t.GVK()
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", gvk.Kind, err)
	}
	return list, nil
}

// markServing ends a reconcile that found everything in place, and counts the instances
// again within instancesPoll: they are watched by the instance controller, not here.
func (r *Reconciler) markServing(_ context.Context, s *scope) (bool, error) {
	markReady(s.template, s.crd.Name)
	s.requeue.After(instancesPoll)
	return true, nil
}
