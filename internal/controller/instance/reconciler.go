package instance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/controller/stacktemplate"
)

// FieldManager owns what this controller writes: instances' status, their Stacks and
// parameter Secrets, and the outputs published to the tenants.
const FieldManager = "stackwright-instance-controller"

// Events recorded on instances (and, for the open-template-revision annotation, on their
// Stacks).
const (
	EventStackCreated      = "StackCreated"
	EventUpdateSucceeded   = "UpdateSucceeded"
	EventUpdateFailed      = "UpdateFailed"
	EventApprovalIgnored   = "ApprovalIgnored"
	EventRevisionNotOpened = "RevisionNotOpened"

	eventActionRender  = "Render"
	eventActionObserve = "Observe"
)

// Request is one instance of the kind of one template.
type Request struct {
	Template string
	types.NamespacedName
}

// Controller reconciles the instances of every kind a StackTemplate defines: each becomes a
// Stack in the template's platform namespace, and the instance shows that Stack's
// progress and receives the outputs the template publishes. The kinds are served as their
// templates come (Serve), on one controller.
type Controller struct {
	Client client.Client
	// APIReader reads namespaces, which the manager does not cache.
	APIReader client.Reader
	Cache     cache.Cache
	Recorder  events.EventRecorder
	// ApprovalPolicy names the ValidatingAdmissionPolicy (and its binding) that checks who
	// sets approve and reject annotations on instances; empty means approvals on
	// instances are ignored.
	ApprovalPolicy string

	ctrl   controller.TypedController[Request]
	mu     sync.Mutex
	served map[schema.GroupVersionKind]string
}

var _ stacktemplate.Server = (*Controller)(nil)

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
func (c *Controller) Serve(_ context.Context, template string, gvk schema.GroupVersionKind) error {
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

// Reconcile implements reconcile.TypedReconciler.
func (c *Controller) Reconcile(ctx context.Context, req Request) (result reconcile.Result, retErr error) {
	start := time.Now()
	t := &v1alpha1.StackTemplate{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: req.Template}, t); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(t.GVK())
	if err := c.reader(t.GVK()).Get(ctx, req.NamespacedName, u); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, c.removeOrphans(ctx, t, req.NamespacedName)
		}
		return reconcile.Result{}, fmt.Errorf("failed to get %s %s: %w", t.Spec.API.Kind, req.NamespacedName, err)
	}
	in, err := parse(u)
	if err != nil {
		return reconcile.Result{}, err
	}
	p := patch.New(c.Client, u, t.Spec.API.Kind, FieldManager)
	defer func() {
		conditions.Finalize(in, &in.status.ObservedGeneration)
		if err := in.store(); err != nil {
			retErr = errors.Join(retErr, err)
		} else if err := p.Status(ctx, u); err != nil {
			retErr = errors.Join(retErr, err)
		}
		ctrl.LoggerFrom(ctx).Info("Reconciled "+t.Spec.API.Kind, "duration", time.Since(start).Round(time.Millisecond),
			"generation", u.GetGeneration(), "ready", conditions.IsTrue(in, pulumiv1.ConditionReady))
	}()
	name := stackName(t.Name, u.GetNamespace(), u.GetName())
	if !u.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, c.reconcileDelete(ctx, t, in, p, name)
	}
	if controllerutil.AddFinalizer(u, v1alpha1.InstanceFinalizer) {
		if err := p.Finalizers(ctx, u); err != nil {
			return reconcile.Result{}, err
		}
	}
	if !conditions.IsTrue(t, pulumiv1.ConditionReady) || !t.DeletionTimestamp.IsZero() {
		conditions.MarkReconciling(in, v1alpha1.ReasonTemplateNotReady, fmt.Sprintf("StackTemplate %s is not serving; the stack stays as it is", t.Name))
		return reconcile.Result{}, nil
	}
	if ok, err := c.namespaceAllowed(ctx, t, u.GetNamespace()); err != nil || !ok {
		if ok := err == nil; ok {
			conditions.MarkStalled(in, v1alpha1.ReasonNamespaceNotAllowed, fmt.Sprintf(
				"StackTemplate %s does not serve namespace %s (its namespaceSelector); ask the platform team", t.Name, u.GetNamespace()))
		}
		return reconcile.Result{}, err
	}
	a, err := c.applyStack(ctx, t, in, name)
	if err != nil || a == nil {
		return reconcile.Result{}, err
	}
	before := in.status.LastUpdate.DeepCopy()
	mirror(in, a.stack, t.Spec.InstanceMessages)
	if in.status.Approval != nil && in.status.Approval.State == string(pulumiv1.ApprovalAwaiting) {
		if a.ignored == "" && t.Spec.Approvers != nil {
			if a.ignored, err = c.approvalPolicyMissing(ctx); err != nil {
				return reconcile.Result{}, err
			}
		}
		conditions.MarkReconciling(in, pulumiv1.ReasonAwaitingApproval, awaitingMessage(t, u, a.stack, in.status.Approval, a.ignored))
	}
	c.announce(u, before, in.status.LastUpdate)
	return reconcile.Result{}, c.publish(ctx, in, a.stack, a.outputs)
}

// announce records an event on the instance when its stack's last operation changed.
func (c *Controller) announce(u *unstructured.Unstructured, before, after *v1alpha1.InstanceUpdate) {
	if after == nil || (before != nil && before.Time.Equal(after.Time) && before.State == after.State && before.Type == after.Type) {
		return
	}
	typ, reason := corev1.EventTypeNormal, EventUpdateSucceeded
	if after.State == string(pulumiv1.UpdateStateFailed) {
		typ, reason = corev1.EventTypeWarning, EventUpdateFailed
	}
	c.Recorder.Eventf(u, nil, typ, reason, eventActionObserve, "%s %s: %s", after.Type, after.State, after.Message)
}

// namespaceAllowed reports whether the template's namespaceSelector selects namespace.
func (c *Controller) namespaceAllowed(ctx context.Context, t *v1alpha1.StackTemplate, namespace string) (bool, error) {
	if t.Spec.NamespaceSelector == nil {
		return true, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(t.Spec.NamespaceSelector)
	if err != nil {
		// The API server validated the selector's shape; an operator it cannot parse
		// selects nothing rather than everything.
		return false, nil //nolint:nilerr // an unparsable selector is an answer, not a failure
	}
	ns := &corev1.Namespace{}
	if err := c.APIReader.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return false, fmt.Errorf("failed to get namespace %s: %w", namespace, err)
	}
	return sel.Matches(labels.Set(ns.Labels)), nil
}

// applied is what applyStack made of an instance.
type applied struct {
	stack *pulumiv1.Stack
	// outputs are those the Stack's template revision publishes.
	outputs []string
	// ignored says why the instance's approval annotations were not forwarded.
	ignored string
}

// applyStack renders the instance's Stack (and its parameter Secret) from the template
// revision it is to run, and creates it or brings it to the rendering. Nil with no error
// means the instance waits or is Stalled.
func (c *Controller) applyStack(ctx context.Context, t *v1alpha1.StackTemplate, in *instance, name string) (*applied, error) {
	u := in.obj
	params, err := in.parameters()
	if err != nil {
		conditions.MarkStalled(in, v1alpha1.ReasonParametersInvalid, err.Error())
		return nil, nil
	}
	st := &pulumiv1.Stack{}
	err = c.Client.Get(ctx, client.ObjectKey{Namespace: t.Spec.Namespace, Name: name}, st)
	switch {
	case apierrors.IsNotFound(err):
		st = &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: t.Spec.Namespace, Name: name}}
	case err != nil:
		return nil, fmt.Errorf("failed to get Stack %s/%s: %w", t.Spec.Namespace, name, err)
	case st.Labels[v1alpha1.TemplateLabel] != t.Name:
		conditions.MarkStalled(in, v1alpha1.ReasonStackConflict, fmt.Sprintf("Stack %s/%s exists and is not this instance's", t.Spec.Namespace, name))
		return nil, nil
	case st.Labels[v1alpha1.InstanceUIDLabel] != string(u.GetUID()) || !st.DeletionTimestamp.IsZero():
		// An earlier instance of this name, deleted: its Stack goes first.
		conditions.MarkReconciling(in, v1alpha1.ReasonDestroying, fmt.Sprintf("waiting for Stack %s/%s of an earlier instance of this name to be deleted", t.Spec.Namespace, name))
		return nil, nil
	}
	target, note := targetRevision(t, st)
	if note != "" {
		c.Recorder.Eventf(st, nil, corev1.EventTypeWarning, EventRevisionNotOpened, eventActionRender, "%s", note)
	}
	rev, err := c.revision(ctx, t, in, target)
	if err != nil || rev == nil {
		return nil, err
	}
	spec, err := stacktemplate.DecodeStack(rev.Spec.Stack)
	if err != nil {
		conditions.MarkStalled(in, v1alpha1.ReasonTemplateNotReady, fmt.Sprintf("StackTemplateRevision %s: %v", rev.Name, err))
		return nil, nil
	}
	r, err := render(&rev.Spec, spec, u.GetNamespace(), u.GetName(), name, params)
	if err != nil {
		conditions.MarkStalled(in, v1alpha1.ReasonParametersInvalid, err.Error())
		return nil, nil
	}
	forward, ignored, err := c.approvals(ctx, t, u, st)
	if err != nil {
		return nil, err
	}
	if ignored != "" {
		// The recorder folds repeats of one event into a count.
		c.Recorder.Eventf(u, nil, corev1.EventTypeWarning, EventApprovalIgnored, eventActionRender, "The approve and reject annotations are ignored: %s", ignored)
	}
	if err := c.applyParameterSecret(ctx, t, u, name, r.secrets); err != nil {
		return nil, err
	}
	want := st.DeepCopy()
	want.Labels = labels.Merge(want.Labels, map[string]string{
		v1alpha1.TemplateLabel: t.Name, v1alpha1.InstanceNamespaceLabel: u.GetNamespace(), v1alpha1.InstanceUIDLabel: string(u.GetUID()),
		v1alpha1.TemplateRevisionLabel: strconv.FormatInt(rev.Spec.Revision, 10),
	})
	want.Annotations = labels.Merge(want.Annotations, map[string]string{
		v1alpha1.InstanceAnnotation:  u.GetNamespace() + "/" + u.GetName(),
		instanceGenerationAnnotation: strconv.FormatInt(u.GetGeneration(), 10),
	})
	maps.Copy(want.Annotations, forward)
	want.Spec = r.spec
	switch {
	case st.ResourceVersion == "":
		if err := c.Client.Create(ctx, want, client.FieldOwner(FieldManager)); err != nil {
			return nil, fmt.Errorf("failed to create Stack %s/%s: %w", want.Namespace, want.Name, err)
		}
		c.Recorder.Eventf(u, nil, corev1.EventTypeNormal, EventStackCreated, eventActionRender, "Created Stack %s/%s from revision %d of StackTemplate %s", want.Namespace, want.Name, rev.Spec.Revision, t.Name)
	case !apiequality.Semantic.DeepEqual(st.Spec, want.Spec) || !maps.Equal(st.Labels, want.Labels) || !maps.Equal(st.Annotations, want.Annotations):
		if err := c.Client.Update(ctx, want, client.FieldOwner(FieldManager)); err != nil {
			return nil, fmt.Errorf("failed to update Stack %s/%s: %w", want.Namespace, want.Name, err)
		}
	}
	return &applied{stack: want, outputs: rev.Spec.Outputs, ignored: ignored}, nil
}

// applyParameterSecret keeps the Secret of the instance's secret config values in the
// platform namespace, and deletes it when there are none.
func (c *Controller) applyParameterSecret(ctx context.Context, t *v1alpha1.StackTemplate, u *unstructured.Unstructured, stack string, data map[string][]byte) error {
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: t.Spec.Namespace, Name: parameterSecretName(stack)}
	err := c.Client.Get(ctx, key, sec)
	switch {
	case apierrors.IsNotFound(err):
		if len(data) == 0 {
			return nil
		}
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{
				v1alpha1.TemplateLabel: t.Name, v1alpha1.InstanceUIDLabel: string(u.GetUID()),
			}},
			Type: corev1.SecretTypeOpaque, Data: data,
		}
		if err := c.Client.Create(ctx, sec, client.FieldOwner(FieldManager)); err != nil {
			return fmt.Errorf("failed to create Secret %s: %w", key, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("failed to get Secret %s: %w", key, err)
	case sec.Labels[v1alpha1.TemplateLabel] != t.Name || sec.Labels[v1alpha1.InstanceUIDLabel] != string(u.GetUID()):
		// Another instance's (their Stacks' names collided), or not Stackwright's: neither
		// rewritten nor deleted.
		if len(data) == 0 {
			return nil
		}
		return fmt.Errorf("failed to write Secret %s: it exists and is not the instance's", key)
	case len(data) == 0:
		if err := c.Client.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete Secret %s: %w", key, err)
		}
		return nil
	case maps.EqualFunc(sec.Data, data, func(a, b []byte) bool { return string(a) == string(b) }):
		return nil
	}
	sec.Data = data
	if err := c.Client.Update(ctx, sec, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("failed to update Secret %s: %w", key, err)
	}
	return nil
}

// reconcileDelete deletes the instance's Stack (which destroys the stack or keeps it, as
// the template's destroyOnFinalize says), waits until it is gone, removes the parameter
// Secret, and lets the instance go; its published outputs are owned by it and go with it.
func (c *Controller) reconcileDelete(ctx context.Context, t *v1alpha1.StackTemplate, in *instance, p *patch.Patcher, name string) error {
	u := in.obj
	if !controllerutil.ContainsFinalizer(u, v1alpha1.InstanceFinalizer) {
		return nil
	}
	st := &pulumiv1.Stack{}
	err := c.Client.Get(ctx, client.ObjectKey{Namespace: t.Spec.Namespace, Name: name}, st)
	switch {
	case client.IgnoreNotFound(err) != nil:
		return fmt.Errorf("failed to get Stack %s/%s: %w", t.Spec.Namespace, name, err)
	case err == nil && st.Labels[v1alpha1.InstanceUIDLabel] == string(u.GetUID()):
		if st.DeletionTimestamp.IsZero() {
			if err := c.Client.Delete(ctx, st); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("failed to delete Stack %s/%s: %w", st.Namespace, st.Name, err)
			}
		}
		msg := fmt.Sprintf("waiting for Stack %s/%s to be deleted", st.Namespace, st.Name)
		if c := conditions.Get(st, pulumiv1.ConditionReady); c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		conditions.MarkReconciling(in, v1alpha1.ReasonDestroying, msg)
		return nil
	}
	if err := c.applyParameterSecret(ctx, t, u, name, nil); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(u, v1alpha1.InstanceFinalizer)
	return p.Finalizers(ctx, u)
}

// removeOrphans deletes the Stacks (and parameter Secrets) of an instance that is gone
// without its finalizer having run (removed by hand, or its kind's definition deleted).
func (c *Controller) removeOrphans(ctx context.Context, t *v1alpha1.StackTemplate, key types.NamespacedName) error {
	var stacks pulumiv1.StackList
	if err := c.Client.List(ctx, &stacks, client.InNamespace(t.Spec.Namespace), client.MatchingLabels{
		v1alpha1.TemplateLabel: t.Name, v1alpha1.InstanceNamespaceLabel: key.Namespace,
	}); err != nil {
		return fmt.Errorf("failed to list Stacks of %s: %w", key, err)
	}
	for i := range stacks.Items {
		st := &stacks.Items[i]
		if ns, name, _ := instanceOf(st); ns != key.Namespace || name != key.Name || !st.DeletionTimestamp.IsZero() {
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Deleting the Stack of a deleted instance", "stack", st.Name)
		if err := c.Client.Delete(ctx, st); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete Stack %s/%s: %w", st.Namespace, st.Name, err)
		}
		// The Stack's parameter Secret, if it is the same instance's.
		sec := &corev1.Secret{}
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: st.Namespace, Name: parameterSecretName(st.Name)}, sec)
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to get Secret %s/%s: %w", st.Namespace, parameterSecretName(st.Name), err)
		}
		if err != nil || sec.Labels[v1alpha1.InstanceUIDLabel] != st.Labels[v1alpha1.InstanceUIDLabel] {
			continue
		}
		if err := c.Client.Delete(ctx, sec, client.Preconditions{UID: &sec.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete Secret %s/%s: %w", sec.Namespace, sec.Name, err)
		}
	}
	return nil
}
