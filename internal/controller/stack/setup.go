package stack

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/source/flux"
)

// Cache indexes. Each maps an object to the names it is looked up by.
const (
	// IndexProgramRef indexes Stacks by the Program they use.
	IndexProgramRef = "stackwright.dev/programRef"
	// IndexSecretRefs indexes Stacks by every Secret they reference.
	IndexSecretRefs = "stackwright.dev/secretRefs"
	// IndexConfigMapRefs indexes Stacks by every ConfigMap they reference.
	IndexConfigMapRefs = "stackwright.dev/configMapRefs"
	// IndexUpdateStack indexes Updates by the Stack they run on.
	IndexUpdateStack = "stackwright.dev/stackName"
	// IndexPrerequisites indexes Stacks by the names of their prerequisites.
	IndexPrerequisites = "stackwright.dev/prerequisites"
	// IndexFluxSourceRef indexes Stacks by the Flux source they use ("<kind>/<name>").
	IndexFluxSourceRef = "stackwright.dev/fluxSourceRef"
)

// updateName is <stack>-<first 10 hex of the key>-<attempt>, shortened to fit a name.
func updateName(stack, key string, attempt int32) string {
	suffix := "-" + key[:min(10, len(key))] + "-" + strconv.Itoa(int(attempt))
	const maxName = 253
	if len(stack)+len(suffix) > maxName {
		stack = strings.TrimRight(stack[:maxName-len(suffix)], "-.")
	}
	return stack + suffix
}

// SetupWithManager registers the indexes and watches the Stack controller needs.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	idx := mgr.GetFieldIndexer()
	indexes := []struct {
		obj client.Object
		key string
		fn  client.IndexerFunc
	}{
		{&pulumiv1.Stack{}, IndexProgramRef, func(o client.Object) []string {
			if ref := o.(*pulumiv1.Stack).Spec.ProgramRef; ref != nil {
				return []string{ref.Name}
			}
			return nil
		}},
		{&pulumiv1.Stack{}, IndexSecretRefs, func(o client.Object) []string { return secretRefs(&o.(*pulumiv1.Stack).Spec) }},
		{&pulumiv1.Stack{}, IndexConfigMapRefs, func(o client.Object) []string { return configMapRefs(&o.(*pulumiv1.Stack).Spec) }},
		{&pulumiv1.Stack{}, IndexPrerequisites, func(o client.Object) []string { return prerequisiteNames(&o.(*pulumiv1.Stack).Spec) }},
		{&v1alpha1.Update{}, IndexUpdateStack, func(o client.Object) []string { return []string{o.(*v1alpha1.Update).Spec.StackName} }},
		{&pulumiv1.Stack{}, IndexFluxSourceRef, func(o client.Object) []string {
			if key := flux.IndexKey(o.(*pulumiv1.Stack)); key != "" {
				return []string{key}
			}
			return nil
		}},
	}
	for _, i := range indexes {
		if err := idx.IndexField(ctx, i.obj, i.key, i.fn); err != nil {
			return fmt.Errorf("failed to index %s: %w", i.key, err)
		}
	}
	// Only the Flux kinds installed now are watched: a manager must start where Flux is
	// absent. Stacks on a kind installed later still converge, by faultRequeue polling,
	// and get their watch when the manager restarts.
	fluxKinds, err := flux.Watchable(mgr.GetRESTMapper())
	if err != nil {
		return fmt.Errorf("failed to discover Flux source kinds: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("stack").
		WithOptions(opts).
		For(&pulumiv1.Stack{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionStarted{}))).
		Owns(&v1alpha1.Update{}, builder.WithPredicates(phaseChanged{})).
		Watches(&pulumiv1.Program{}, r.enqueueReferrers(IndexProgramRef), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, r.enqueueReferrers(IndexSecretRefs), builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Watches(&corev1.ConfigMap{}, r.enqueueReferrers(IndexConfigMapRefs), builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		// A prerequisite that succeeds (or appears, or changes its own prerequisites)
		// releases the Stacks waiting on it at once, not at their next requeue.
		Watches(&pulumiv1.Stack{}, r.enqueueReferrers(IndexPrerequisites), builder.WithPredicates(prerequisiteChanged{}))
	for _, gvk := range fluxKinds {
		src := &unstructured.Unstructured{}
		src.SetGroupVersionKind(gvk)
		b = b.Watches(src, r.enqueueReferrersBy(IndexFluxSourceRef, flux.ObjectIndexKey), builder.WithPredicates(flux.ArtifactChanged{}))
	}
	return b.Complete(r)
}

// enqueueReferrers maps an object to the Stacks in its namespace whose index names it.
func (r *Reconciler) enqueueReferrers(index string) handler.EventHandler {
	return r.enqueueReferrersBy(index, client.Object.GetName)
}

// enqueueReferrersBy maps an object to the Stacks in its namespace whose index holds the
// object's key ("" matches none).
func (r *Reconciler) enqueueReferrersBy(index string, key func(client.Object) string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		k := key(o)
		if k == "" {
			return nil
		}
		var stacks pulumiv1.StackList
		if err := r.Client.List(ctx, &stacks, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: k}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to list Stacks referencing object", "index", index, "object", client.ObjectKeyFromObject(o))
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(stacks.Items))
		for i := range stacks.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&stacks.Items[i])})
		}
		return reqs
	})
}

func secretRefs(spec *pulumiv1.StackSpec) []string {
	var names []string
	add := func(ref *pulumiv1.ResourceRef) {
		if ref != nil && ref.Type == pulumiv1.ResourceSelectorSecret && ref.Secret != nil {
			names = append(names, ref.Secret.Name)
		}
	}
	for _, ref := range spec.EnvRefs {
		add(&ref)
	}
	for _, ref := range spec.SecretsRef {
		add(&ref)
	}
	names = append(names, spec.EnvSecrets...)
	if spec.AccessTokenSecret != "" {
		names = append(names, spec.AccessTokenSecret)
	}
	if spec.GitAuthSecret != "" {
		names = append(names, spec.GitAuthSecret)
	}
	if a := spec.GitAuth; a != nil {
		add(a.AccessToken)
		if a.SSHAuth != nil {
			add(&a.SSHAuth.SSHPrivateKey)
			add(a.SSHAuth.Password)
		}
		if a.BasicAuth != nil {
			add(&a.BasicAuth.UserName)
			add(&a.BasicAuth.Password)
		}
	}
	return dedupe(names)
}

func configMapRefs(spec *pulumiv1.StackSpec) []string {
	names := append([]string(nil), spec.Envs...)
	for _, ref := range spec.ConfigRef {
		names = append(names, ref.Name)
	}
	return dedupe(names)
}

func dedupe(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// pruneUpdates keeps the newest finished Updates of a Stack (UpdateHistory of them) and
// deletes the rest with their outputs Secrets. The Updates the status names are always
// kept: they are the record of what is deployed.
func (r *Reconciler) pruneUpdates(ctx context.Context, stack *pulumiv1.Stack) error {
	if r.Options.UpdateHistory <= 0 {
		return nil
	}
	var list v1alpha1.UpdateList
	if err := r.Client.List(ctx, &list, client.InNamespace(stack.Namespace), client.MatchingFields{IndexUpdateStack: stack.Name}); err != nil {
		return fmt.Errorf("failed to list Updates of Stack %s: %w", stack.Name, err)
	}
	keep := map[string]bool{}
	if lu := stack.Status.LastUpdate; lu != nil {
		keep[lu.Name] = true
	}
	if cu := stack.Status.CurrentUpdate; cu != nil {
		keep[cu.Name] = true
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
	for _, u := range finished[min(len(finished), max(r.Options.UpdateHistory-len(keep), 0)):] {
		if err := r.Client.Delete(ctx, u); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete Update %s: %w", u.Name, err)
		}
		if name := u.Status.OutputsSecretName; name != "" {
			sec := &corev1.Secret{}
			sec.Namespace, sec.Name = u.Namespace, name
			// Owned by the Update, so garbage collection would get it too; deleting it now
			// keeps outputs from outliving their record when no collector runs.
			if err := r.Client.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("failed to delete outputs Secret %s: %w", name, err)
			}
		}
	}
	return nil
}

// deletionStarted passes the update that sets a deletionTimestamp.
type deletionStarted struct{ predicate.Funcs }

func (deletionStarted) Update(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
}

// phaseChanged passes Update events that matter to the owning Stack: creation, deletion,
// and changes of phase (not every progress write of the runner).
type phaseChanged struct{ predicate.Funcs }

func (phaseChanged) Update(e event.UpdateEvent) bool {
	o, okOld := e.ObjectOld.(*v1alpha1.Update)
	n, okNew := e.ObjectNew.(*v1alpha1.Update)
	return !okOld || !okNew || o.Status.Phase != n.Status.Phase
}

// prerequisiteChanged passes the events of a Stack that its dependents act on: creation,
// deletion, a new last update (its state or finish time), a new spec (its own
// prerequisites) and a change of Stalled.
type prerequisiteChanged struct{ predicate.Funcs }

func (prerequisiteChanged) Update(e event.UpdateEvent) bool {
	o, okOld := e.ObjectOld.(*pulumiv1.Stack)
	n, okNew := e.ObjectNew.(*pulumiv1.Stack)
	if !okOld || !okNew {
		return true
	}
	return o.Generation != n.Generation || isStalled(o) != isStalled(n) ||
		!equality.Semantic.DeepEqual(o.Status.LastUpdate, n.Status.LastUpdate)
}
