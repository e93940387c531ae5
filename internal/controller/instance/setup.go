package instance

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// SetupWithManager builds the controller and watches Stacks and templates; the kinds
// follow with Serve.
func (c *Controller) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	c.served = map[schema.GroupVersionKind]string{}
	tc, err := controller.NewTyped("instance", mgr, controller.TypedOptions[Request]{
		Reconciler:              c,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		SkipNameValidation:      opts.SkipNameValidation,
		LogConstructor: func(r *Request) logr.Logger {
			l := mgr.GetLogger().WithValues("controller", "instance")
			if r != nil {
				l = l.WithValues("template", r.Template, "namespace", r.Namespace, "name", r.Name)
			}
			return l
		},
	})
	if err != nil {
		return fmt.Errorf("failed to set up the instance controller: %w", err)
	}
	c.ctrl = tc
	// A Stack leads back to its instance through its labels and annotation.
	if err := tc.Watch(source.TypedKind(c.Cache, client.Object(&pulumiv1.Stack{}),
		handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []Request {
			ns, name, ok := instanceOf(o)
			if !ok {
				return nil
			}
			return []Request{{Template: o.GetLabels()[v1alpha1.TemplateLabel], NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
		}), predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[v1alpha1.TemplateLabel] != "" }))); err != nil {
		return fmt.Errorf("failed to watch Stacks: %w", err)
	}
	// A rollout of template revisions decides which revision its Stacks are rendered from.
	if err := tc.Watch(source.TypedKind(c.Cache, client.Object(&v1alpha1.StackRollout{}), c.enqueueRolloutInstances())); err != nil {
		return fmt.Errorf("failed to watch StackRollouts: %w", err)
	}
	// A template's change, and its new revision once served, re-render its instances.
	return tc.Watch(source.TypedKind(c.Cache, client.Object(&v1alpha1.StackTemplate{}),
		handler.TypedEnqueueRequestsFromMapFunc(c.instancesOf), predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				o, ok1 := e.ObjectOld.(*v1alpha1.StackTemplate)
				n, ok2 := e.ObjectNew.(*v1alpha1.StackTemplate)
				return ok1 && ok2 && o.Status.Revision != n.Status.Revision
			},
		})))
}

// instanceOf reads the instance a Stack belongs to from its annotation.
func instanceOf(o client.Object) (string, string, bool) {
	ns, name, ok := strings.Cut(o.GetAnnotations()[v1alpha1.InstanceAnnotation], "/")
	return ns, name, ok && ns != "" && name != "" && o.GetLabels()[v1alpha1.TemplateLabel] != ""
}

// enqueueRolloutInstances queues the instances whose Stack's revision a change of a rollout
// of template revisions may have changed (see StackRollout.ChangedFor): all of its Stacks'
// when it is created or deleted, or it started, completed or aborted a target; otherwise
// those whose wave opened.
func (c *Controller) enqueueRolloutInstances() handler.TypedEventHandler[client.Object, Request] {
	enqueue := func(ctx context.Context, ro *v1alpha1.StackRollout, names []string, q workqueue.TypedRateLimitingInterface[Request]) {
		sel, err := ro.StackSelector()
		if err != nil || ro.Spec.Template == nil {
			return
		}
		var list pulumiv1.StackList
		// Only the names, labels and annotations are read.
		if err := c.Cache.List(ctx, &list, client.InNamespace(ro.Namespace), client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to list the Stacks of a StackRollout", "namespace", ro.Namespace, "name", ro.Name)
			return
		}
		for i := range list.Items {
			st := &list.Items[i]
			if ns, name, ok := instanceOf(st); ok && (names == nil || slices.Contains(names, st.Name)) {
				q.Add(Request{Template: ro.Spec.Template.Name, NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
			}
		}
	}
	return handler.TypedFuncs[client.Object, Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[Request]) {
			if ro, ok := e.Object.(*v1alpha1.StackRollout); ok {
				enqueue(ctx, ro, nil, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[Request]) {
			if ro, ok := e.Object.(*v1alpha1.StackRollout); ok {
				enqueue(ctx, ro, nil, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[Request]) {
			o, okOld := e.ObjectOld.(*v1alpha1.StackRollout)
			n, okNew := e.ObjectNew.(*v1alpha1.StackRollout)
			if !okOld || !okNew {
				return
			}
			if every, opened := n.ChangedFor(o); every {
				enqueue(ctx, o, nil, q)
				enqueue(ctx, n, nil, q)
			} else if len(opened) > 0 {
				enqueue(ctx, n, opened, q)
			}
		},
	}
}

// instancesOf lists a served template's instances from the cache.
func (c *Controller) instancesOf(ctx context.Context, o client.Object) []Request {
	t, ok := o.(*v1alpha1.StackTemplate)
	if !ok || !c.isServed(t.GVK()) {
		return nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(t.GVK().GroupVersion().WithKind(t.Spec.API.Kind + "List"))
	if err := c.Cache.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list instances of a changed template", "template", t.Name)
		return nil
	}
	reqs := make([]Request, 0, len(list.Items))
	for _, u := range list.Items {
		reqs = append(reqs, Request{Template: t.Name, NamespacedName: types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}})
	}
	return reqs
}

// reader reads instances of gvk from the informer Serve started for it; a kind not (or no
// longer) served is read from the API server, since asking the cache for it would start an
// informer for a resource that may not exist.
func (c *Controller) reader(gvk schema.GroupVersionKind) client.Reader {
	if c.isServed(gvk) {
		return c.Cache
	}
	return c.APIReader
}

func (c *Controller) isServed(gvk schema.GroupVersionKind) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.served[gvk]
	return ok
}

// Serve implements stacktemplate.Server: it watches gvk's instances, once.
func (c *Controller) Serve(ctx context.Context, template string, gvk schema.GroupVersionKind) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.served[gvk]; ok {
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := c.ctrl.Watch(source.TypedKind(c.Cache, client.Object(u),
		handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []Request {
			return []Request{{Template: template, NamespacedName: client.ObjectKeyFromObject(o)}}
		}))); err != nil {
		return fmt.Errorf("failed to watch %s: %w", gvk, err)
	}
	c.served[gvk] = template
	// The kind's instances are read in its storage version: once that changes, the
	// informer of the earlier one would only duplicate every event, and fail once that
	// version is no longer served.
	for old, t := range c.served {
		if t != template || old == gvk {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(old)
		if err := c.Cache.RemoveInformer(ctx, u); err != nil {
			return fmt.Errorf("failed to stop watching %s: %w", old, err)
		}
		delete(c.served, old)
	}
	return nil
}

// Forget implements stacktemplate.Server: it stops the informer of gvk, whose definition is
// gone, so that it does not retry a resource that no longer exists.
func (c *Controller) Forget(ctx context.Context, gvk schema.GroupVersionKind) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.served[gvk]; !ok {
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := c.Cache.RemoveInformer(ctx, u); err != nil {
		return fmt.Errorf("failed to stop watching %s: %w", gvk, err)
	}
	delete(c.served, gvk)
	return nil
}
