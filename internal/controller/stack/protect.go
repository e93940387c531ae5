package stack

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/inputs"
)

// Input protection. Deleting a namespace deletes everything in it at once: a
// destroyOnFinalize Stack would find the Secret holding its passphrase or credentials gone
// before its destroy could read it, and its resources would be left behind. As Kubernetes
// keeps a PersistentVolumeClaim while a Pod uses it, the Secrets and ConfigMaps such a
// Stack reads carry pulumiv1.InputsFinalizer while it holds its own finalizer. Deleting
// one of them by hand is not held up: protection is only for the namespace's deletion.

// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=patch

// inputsRecheck is how often a protected object that is being deleted is looked at again:
// its last Stack normally releases it, and this catches a Stack that vanished without doing
// so (its finalizer removed by hand).
const inputsRecheck = 30 * time.Second

// inputKind is a kind of object a Stack reads its inputs from.
type inputKind struct {
	name, controller string
	new              func() client.Object
	// refs picks this kind's names out of inputs.References.
	refs func(secrets, configMaps []string) []string
}

var inputKinds = []inputKind{
	// Secrets by their metadata: the finalizer is all protection touches, and the
	// manager caches no Secret values.
	{name: "Secret", controller: "stack-inputs-secret", new: func() client.Object {
		o := &metav1.PartialObjectMetadata{}
		o.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		return o
	},
		refs: func(s, _ []string) []string { return s }},
	{name: "ConfigMap", controller: "stack-inputs-configmap", new: func() client.Object { return &corev1.ConfigMap{} },
		refs: func(_, c []string) []string { return c }},
}

// protectInputs puts the finalizer on the inputs a destroyOnFinalize Stack reads. An
// input that is missing or already being deleted is left to resolveInputs to report.
func (r *Reconciler) protectInputs(ctx context.Context, s *scope) (bool, error) {
	if !s.stack.Spec.DestroyOnFinalize {
		return true, nil
	}
	secrets, configMaps := inputs.References(s.stack)
	for _, k := range inputKinds {
		for _, name := range k.refs(secrets, configMaps) {
			obj := k.new()
			if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.stack.Namespace, Name: name}, obj); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return false, fmt.Errorf("failed to get %s %s: %w", k.name, name, err)
			}
			if !obj.GetDeletionTimestamp().IsZero() || controllerutil.ContainsFinalizer(obj, pulumiv1.InputsFinalizer) {
				continue
			}
			if err := r.patchInputFinalizer(ctx, obj, true); err != nil {
				return false, fmt.Errorf("failed to protect %s %s: %w", k.name, name, err)
			}
		}
	}
	return true, nil
}

// releaseInputs removes the finalizer from the inputs of a Stack about to release its
// own, unless another Stack still needs them.
func (r *Reconciler) releaseInputs(ctx context.Context, stack *pulumiv1.Stack) error {
	needed := r.neededInputs(stack.Namespace, stack.UID)
	secrets, configMaps := inputs.References(stack)
	for _, k := range inputKinds {
		for _, name := range k.refs(secrets, configMaps) {
			if _, err := r.releaseInput(ctx, k, client.ObjectKey{Namespace: stack.Namespace, Name: name}, needed); err != nil {
				return err
			}
		}
	}
	return nil
}

// releaseInput removes the finalizer from one input unless needed says a Stack still
// needs it, and reports whether the input is still protected.
func (r *Reconciler) releaseInput(ctx context.Context, k inputKind, key client.ObjectKey, needed func(context.Context, inputKind, string) (bool, error)) (bool, error) {
	obj := k.new()
	if err := r.Client.Get(ctx, key, obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !controllerutil.ContainsFinalizer(obj, pulumiv1.InputsFinalizer) {
		return false, nil
	}
	if keep, err := needed(ctx, k, key.Name); err != nil || keep {
		return true, err
	}
	if err := r.patchInputFinalizer(ctx, obj, false); err != nil {
		return true, fmt.Errorf("failed to release %s %s: %w", k.name, key.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Released input", "kind", k.name, "name", key.Name)
	return false, nil
}

// neededInputs returns whether a Stack of the namespace other than except may still
// destroy with an input: it has destroyOnFinalize, holds its finalizer and reads the
// input. The Stacks are listed once, on the first question, from the API server rather
// than the cache: a shard (--watch-label-selector) caches only its own, and must not
// release an input another shard's Stack needs.
func (r *Reconciler) neededInputs(namespace string, except types.UID) func(context.Context, inputKind, string) (bool, error) {
	var needed map[string]bool // by kind/name
	return func(ctx context.Context, k inputKind, name string) (bool, error) {
		if needed == nil {
			var stacks pulumiv1.StackList
			if err := r.APIReader.List(ctx, &stacks, client.InNamespace(namespace)); err != nil {
				return false, fmt.Errorf("failed to list Stacks of namespace %s: %w", namespace, err)
			}
			needed = map[string]bool{}
			for i := range stacks.Items {
				st := &stacks.Items[i]
				if st.UID == except || !st.Spec.DestroyOnFinalize || !controllerutil.ContainsFinalizer(st, pulumiv1.StackFinalizer) {
					continue
				}
				secrets, configMaps := inputs.References(st)
				for _, kind := range inputKinds {
					for _, n := range kind.refs(secrets, configMaps) {
						needed[kind.name+"/"+n] = true
					}
				}
			}
		}
		return needed[k.name+"/"+name], nil
	}
}

// notNeeded is the answer for an input deleted by itself: its deletion is not held up.
func notNeeded(context.Context, inputKind, string) (bool, error) { return false, nil }

// patchInputFinalizer adds or removes the finalizer. The optimistic lock keeps the
// finalizers that others add or remove meanwhile.
func (r *Reconciler) patchInputFinalizer(ctx context.Context, obj client.Object, add bool) error {
	base := obj.DeepCopyObject().(client.Object)
	if add {
		controllerutil.AddFinalizer(obj, pulumiv1.InputsFinalizer)
	} else {
		controllerutil.RemoveFinalizer(obj, pulumiv1.InputsFinalizer)
	}
	err := r.Client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(fieldManager))
	return client.IgnoreNotFound(err)
}

// inputReconciler releases protected inputs that are being deleted: at once when their
// namespace is not (someone deleted the object itself), and otherwise once no Stack needs
// them.
type inputReconciler struct {
	*Reconciler
	kind inputKind
}

func (r *inputReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.kind.new()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if obj.GetDeletionTimestamp().IsZero() || !controllerutil.ContainsFinalizer(obj, pulumiv1.InputsFinalizer) {
		return ctrl.Result{}, nil
	}
	// Releasing a needed input on a question the API server did not answer could leave a
	// destroy without it: an error waits for the retry instead.
	terminating, err := r.checkNamespaceTerminating(ctx, req.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	needed := notNeeded
	if terminating {
		needed = r.neededInputs(req.Namespace, "")
	}
	protected, err := r.releaseInput(ctx, r.kind, req.NamespacedName, needed)
	if err != nil || !protected {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: inputsRecheck}, nil
}

// setupInputProtection registers the inputReconcilers, with the manager's reconcile
// options (--max-concurrent-reconciles) like every other controller.
func (r *Reconciler) setupInputProtection(mgr ctrl.Manager, opts controller.Options) error {
	deleting := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return !o.GetDeletionTimestamp().IsZero() && controllerutil.ContainsFinalizer(o, pulumiv1.InputsFinalizer)
	})
	for _, k := range inputKinds {
		err := ctrl.NewControllerManagedBy(mgr).
			Named(k.controller).
			WithOptions(opts).
			For(k.new(), builder.WithPredicates(deleting)).
			Complete(&inputReconciler{Reconciler: r, kind: k})
		if err != nil {
			return fmt.Errorf("failed to set up %s protection: %w", k.name, err)
		}
	}
	return nil
}
