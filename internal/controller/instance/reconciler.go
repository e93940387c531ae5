package instance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/kit"
	"github.com/stackwright/stackwright/internal/controller/stacktemplate"
)

// FieldManager owns what this controller writes: instances' status, their Stacks and
// parameter Secrets, and the outputs published to the tenants.
const FieldManager = "stackwright-instance-controller"

// Events recorded on instances (and, for the open-template-revision annotation, on their
// Stacks). Each is emitted once the instance's status is written, and on a transition
// only: a new Stack, a new last operation, a warning not announced before.
const (
	EventStackCreated      = "StackCreated"
	EventUpdateSucceeded   = "UpdateSucceeded"
	EventUpdateFailed      = "UpdateFailed"
	EventApprovalIgnored   = "ApprovalIgnored"
	EventRevisionNotOpened = "RevisionNotOpened"
	EventStatusFieldUnset  = "StatusFieldUnset"

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
	// ObjectKinds are the kinds a template's spec.objects may make in its instances'
	// namespaces (--template-object-kinds).
	ObjectKinds []schema.GroupKind

	ctrl    controller.TypedController[Request]
	mu      sync.Mutex
	served  map[schema.GroupVersionKind]string
	notices notices
}

var _ stacktemplate.Server = (*Controller)(nil)

// Reconcile implements reconcile.TypedReconciler: get the template and the instance, defer
// the status write and the events it announces, handle deletion, ensure the finalizer,
// then run the phases that bring the instance's Stack to its rendering.
func (c *Controller) Reconcile(ctx context.Context, req Request) (result reconcile.Result, retErr error) {
	start := time.Now()
	t := &v1alpha1.StackTemplate{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: req.Template}, t); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	in, err := c.getInstance(ctx, t, req)
	if err != nil || in == nil {
		return reconcile.Result{}, err
	}
	s, err := c.newScope(ctx, req, t, in)
	if err != nil {
		return reconcile.Result{}, err
	}
	defer func() {
		err := s.writeStatus(ctx)
		if err != nil {
			retErr = errors.Join(retErr, err)
		}
		s.flush(err)
		logEnd(ctx, s, start)
	}()
	if !in.obj.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, c.reconcileDelete(ctx, s)
	}
	if controllerutil.AddFinalizer(in.obj, v1alpha1.InstanceFinalizer) {
		if err := s.patcher.Finalizers(ctx, in.obj); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, kit.Run(ctx, s,
		c.checkTemplate, c.checkNamespace, c.readParameters, c.findStack, c.chooseRevision, c.composeStacks,
		c.renderStack, c.checkApprovals, c.applyParameters, c.applyStack, c.observeStack, c.observeOutputs, c.publish,
		c.pruneStacks, c.applyObjects,
	)
}

// getInstance reads the instance req names; nil, once the Stacks it left are deleted, when it
// is gone.
func (c *Controller) getInstance(ctx context.Context, t *v1alpha1.StackTemplate, req Request) (*instance, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(t.GVK())
	if err := c.reader(t.GVK()).Get(ctx, req.NamespacedName, u); err != nil {
		if apierrors.IsNotFound(err) {
			c.notices.forget(req)
			return nil, c.removeOrphans(ctx, t, req.NamespacedName)
		}
		return nil, fmt.Errorf("failed to get %s %s: %w", t.Spec.API.Kind, req.NamespacedName, err)
	}
	return parse(u)
}

// logEnd logs one line per reconcile: how long it took and the outcome.
func logEnd(ctx context.Context, s *scope, start time.Time) {
	ctrl.LoggerFrom(ctx).Info("Reconciled "+s.template.Spec.API.Kind, "duration", time.Since(start).Round(time.Millisecond),
		"generation", s.in.obj.GetGeneration(), "ready", conditions.IsTrue(s.in, pulumiv1.ConditionReady))
}
