package stacktemplate

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// SetupWithManager registers the controller. It watches the definitions it made, so that
// their establishment (or a hand edit) is looked at when it happens, and what keeps its
// revisions: its instances' Stacks and the rollouts of its revisions.
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
		// A rollout of the template's revisions keeps its stable revision; a new one may
		// free older revisions.
		Watches(&v1alpha1.StackRollout{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			if ro, ok := o.(*v1alpha1.StackRollout); ok && ro.Spec.Template != nil {
				return []ctrl.Request{{NamespacedName: client.ObjectKey{Name: ro.Spec.Template.Name}}}
			}
			return nil
		}), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				o, ok1 := e.ObjectOld.(*v1alpha1.StackRollout)
				n, ok2 := e.ObjectNew.(*v1alpha1.StackRollout)
				return ok1 && ok2 && v1alpha1.TemplateRevision(o.Status.Stable) != v1alpha1.TemplateRevision(n.Status.Stable)
			},
		})).
		Complete(r)
}
