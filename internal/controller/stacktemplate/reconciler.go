package stacktemplate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/patch"
)

// FieldManager owns what this controller writes: the templates' status, the
// CustomResourceDefinitions of their kinds and their revisions.
const FieldManager = "stackwright-stacktemplate-controller"

// instancesPoll is how often a template counts its instances again (and, being deleted,
// looks for the last to go): instances are watched by the instance controller.
const instancesPoll = time.Minute

// The rights this controller and the instance controller need are granted only by an
// install that serves templates (the chart's templates.apiGroups): they include writing
// CustomResourceDefinitions, so they are not among the generated manager rules.

// Server serves the instances of the kinds templates define (the instance controller).
type Server interface {
	// Serve starts reconciling the instances of gvk, template's kind, once however often
	// called.
	Serve(ctx context.Context, template string, gvk schema.GroupVersionKind) error
	// Forget stops watching gvk, whose CustomResourceDefinition is gone.
	Forget(ctx context.Context, gvk schema.GroupVersionKind) error
}

// Reconciler installs the CustomResourceDefinition of each StackTemplate's kind and has the
// instance controller serve it.
type Reconciler struct {
	Client client.Client
	// APIReader counts a deleted template's instances from the API server itself.
	APIReader client.Reader
	// AllowedGroups are the API groups templates may define kinds in
	// (--template-api-groups); a template of any other group is Stalled.
	AllowedGroups []string
	Instances     Server
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	start := time.Now()
	t := &v1alpha1.StackTemplate{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	p := patch.New(r.Client, t, "StackTemplate", FieldManager)
	defer func() {
		conditions.Finalize(t, &t.Status.ObservedGeneration)
		if err := p.Status(ctx, t); err != nil {
			retErr = errors.Join(retErr, err)
		}
		ctrl.LoggerFrom(ctx).Info("Reconciled StackTemplate", "duration", time.Since(start).Round(time.Millisecond),
			"generation", t.Generation, "ready", conditions.IsTrue(t, pulumiv1.ConditionReady), "requeueAfter", result.RequeueAfter)
	}()
	if !t.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, t, p)
	}
	if controllerutil.AddFinalizer(t, v1alpha1.TemplateFinalizer) {
		if err := p.Finalizers(ctx, t); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !slices.Contains(r.AllowedGroups, t.Spec.API.Group) {
		conditions.MarkStalled(t, v1alpha1.ReasonAPIGroupNotAllowed, fmt.Sprintf(
			"this install serves templates of the API groups %v only (--template-api-groups), not %s", r.AllowedGroups, t.Spec.API.Group))
		return ctrl.Result{}, nil
	}
	if _, err := StackSpec(t); err != nil {
		conditions.MarkStalled(t, v1alpha1.ReasonTemplateInvalid, err.Error())
		return ctrl.Result{}, nil
	}
	want, err := definition(t)
	if err != nil {
		conditions.MarkStalled(t, v1alpha1.ReasonTemplateInvalid, err.Error())
		return ctrl.Result{}, nil
	}
	crd, err := r.applyDefinition(ctx, t, want)
	if err != nil || crd == nil {
		return ctrl.Result{}, err
	}
	t.Status.CustomResourceDefinition = crd.Name
	if !established(crd) {
		conditions.MarkReconciling(t, v1alpha1.ReasonEstablishing, "waiting for the API server to establish CustomResourceDefinition "+crd.Name)
		return ctrl.Result{}, nil
	}
	if err := r.Instances.Serve(ctx, t.Name, t.GVK()); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to serve %s: %w", t.GVK(), err)
	}
	if err := r.ensureRevision(ctx, t); err != nil {
		return ctrl.Result{}, err
	}
	t.Status.Revision = t.Generation
	if err := r.countInstances(ctx, t); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.observeRevisions(ctx, t); err != nil {
		return ctrl.Result{}, err
	}
	conditions.MarkReady(t, v1alpha1.ReasonServing, fmt.Sprintf("serving %s (%s) at revision %d", t.Spec.API.Kind, crd.Name, t.Generation))
	return ctrl.Result{RequeueAfter: instancesPoll}, nil
}

// applyDefinition creates the kind's CustomResourceDefinition, or brings the one it created
// earlier to want. Nil with no error means the template is Stalled: a definition of that
// name that is not this template's, or one the API server refuses.
func (r *Reconciler) applyDefinition(ctx context.Context, t *v1alpha1.StackTemplate, want *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: want.Name}, crd)
	switch {
	case apierrors.IsNotFound(err):
		// The cache holds only the definitions templates made: another of that name shows
		// as not found here, and as existing to the create.
		err := r.Client.Create(ctx, want, client.FieldOwner(FieldManager))
		if apierrors.IsAlreadyExists(err) {
			if err := r.APIReader.Get(ctx, client.ObjectKey{Name: want.Name}, crd); err != nil {
				return nil, fmt.Errorf("failed to get CustomResourceDefinition %s: %w", want.Name, err)
			}
			if crd.Labels[v1alpha1.TemplateLabel] == t.Name {
				// This template's, made moments ago: the cache has not seen it yet.
				return nil, fmt.Errorf("failed to read CustomResourceDefinition %s: not in the cache yet", want.Name)
			}
			conditions.MarkStalled(t, v1alpha1.ReasonDefinitionConflict, fmt.Sprintf(
				"CustomResourceDefinition %s exists and was not created for this template: Stackwright never takes one over", want.Name))
			return nil, nil
		}
		if err != nil {
			return nil, r.refused(t, want, err)
		}
		return want, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get CustomResourceDefinition %s: %w", want.Name, err)
	case crd.Labels[v1alpha1.TemplateLabel] != t.Name:
		conditions.MarkStalled(t, v1alpha1.ReasonDefinitionConflict, fmt.Sprintf(
			"CustomResourceDefinition %s exists and was not created for this template: Stackwright never takes one over", want.Name))
		return nil, nil
	case apiequality.Semantic.DeepEqual(crd.Spec, want.Spec):
		return crd, nil
	}
	crd.Spec = want.Spec
	if err := r.Client.Update(ctx, crd, client.FieldOwner(FieldManager)); err != nil {
		return nil, r.refused(t, want, err)
	}
	return crd, nil
}

// refused turns the API server's refusal of a definition into a Stalled template, and any
// other failure into an error to retry.
func (r *Reconciler) refused(t *v1alpha1.StackTemplate, want *apiextensionsv1.CustomResourceDefinition, err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		conditions.MarkStalled(t, v1alpha1.ReasonTemplateInvalid, fmt.Sprintf("the API server refused CustomResourceDefinition %s: %v", want.Name, err))
		return nil
	}
	return fmt.Errorf("failed to write CustomResourceDefinition %s: %w", want.Name, err)
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// countInstances records how many instances the kind has.
func (r *Reconciler) countInstances(ctx context.Context, t *v1alpha1.StackTemplate) error {
	list, err := r.listInstances(ctx, r.Client, t)
	if err != nil {
		return err
	}
	t.Status.Instances = int32(len(list.Items))
	return nil
}

func (r *Reconciler) listInstances(ctx context.Context, c client.Reader, t *v1alpha1.StackTemplate) (*unstructured.UnstructuredList, error) {
	list := &unstructured.UnstructuredList{}
	gvk := t.GVK()
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", gvk.Kind, err)
	}
	return list, nil
}

// reconcileDelete waits for the template's last instance to go (each destroys its stack
// as the template says), then removes the kind's CustomResourceDefinition and the
// finalizer. Instances are the tenants' objects: the template's deletion never deletes
// them, since deleting the CustomResourceDefinition first would delete them all at once.
func (r *Reconciler) reconcileDelete(ctx context.Context, t *v1alpha1.StackTemplate, p *patch.Patcher) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(t, v1alpha1.TemplateFinalizer) {
		return ctrl.Result{}, nil
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: t.DefinitionName()}, crd)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("failed to get CustomResourceDefinition %s: %w", t.DefinitionName(), err)
	case crd.Labels[v1alpha1.TemplateLabel] != t.Name:
		// Not this template's: nothing of it to remove.
	default:
		if established(crd) {
			list, err := r.listInstances(ctx, r.APIReader, t)
			if err != nil {
				return ctrl.Result{}, err
			}
			if n := len(list.Items); n > 0 {
				t.Status.Instances = int32(n)
				conditions.MarkReconciling(t, v1alpha1.ReasonInstancesRemain, fmt.Sprintf(
					"%d %s instance(s) remain, e.g. %s/%s: the template is removed once they are deleted (each destroys its stack first)",
					n, t.Spec.API.Kind, list.Items[0].GetNamespace(), list.Items[0].GetName()))
				return ctrl.Result{RequeueAfter: instancesPoll / 6}, nil
			}
		}
		if err := r.Client.Delete(ctx, crd); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("failed to delete CustomResourceDefinition %s: %w", crd.Name, err)
		}
		if err := r.Instances.Forget(ctx, t.GVK()); err != nil {
			return ctrl.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(t, v1alpha1.TemplateFinalizer)
	return ctrl.Result{}, p.Finalizers(ctx, t)
}

// SetupWithManager registers the controller. It watches the definitions it made, so that
// their establishment (or a hand edit) is looked at when it happens.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("stacktemplate").
		WithOptions(opts).
		For(&v1alpha1.StackTemplate{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&apiextensionsv1.CustomResourceDefinition{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			if name := o.GetLabels()[v1alpha1.TemplateLabel]; name != "" {
				return []ctrl.Request{{NamespacedName: client.ObjectKey{Name: name}}}
			}
			return nil
		}), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[v1alpha1.TemplateLabel] != ""
		}))).
		// An instance's Stack moving to another revision changes the count of instances
		// behind, and may free old revisions.
		Watches(&pulumiv1.Stack{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			return []ctrl.Request{{NamespacedName: client.ObjectKey{Name: o.GetLabels()[v1alpha1.TemplateLabel]}}}
		}), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[v1alpha1.TemplateLabel] != ""
		}), predicate.LabelChangedPredicate{})).
		Complete(r)
}
