package stacktemplate

import (
	"context"
	"errors"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

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
	// ObjectKinds are the kinds a template's spec.objects may make in its instances'
	// namespaces (--template-object-kinds); a template listing another is Stalled.
	ObjectKinds []schema.GroupKind
	Instances   Server
	// Conversion is how the API server reaches the manager's conversion webhook (its URL
	// or Service, without the path, and the caBundle that trusts it); nil when the
	// manager serves none, and templates whose versions rename parameters Stall.
	Conversion *apiextensionsv1.WebhookClientConfig
}

// Reconcile implements reconcile.Reconciler: get, defer the status patch, handle deletion,
// ensure the finalizer, then run the phases that bring the template to serving its kind.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	start := time.Now()
	t := &v1alpha1.StackTemplate{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &scope{template: t, patcher: patch.New(r.Client, t, "StackTemplate", FieldManager)}
	defer func() {
		finalizeStatus(t)
		if err := s.patcher.Status(ctx, t); err != nil {
			retErr = errors.Join(retErr, err)
		}
		logEnd(ctx, t, start, result)
	}()
	if !t.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if controllerutil.AddFinalizer(t, v1alpha1.TemplateFinalizer) {
		if err := s.patcher.Finalizers(ctx, t); err != nil {
			return ctrl.Result{}, err
		}
	}
	return s.run(ctx,
		r.checkGroup,
		r.checkSpec,
		r.guardChanges,
		r.applyDefinition,
		r.awaitEstablished,
		r.migrateStorage,
		r.serve,
		// The revision exists before its generation is announced as the latest.
		r.ensureRevision,
		r.countInstances,
		r.observeRevisions,
		r.markServing,
	)
}

// logEnd logs one line per reconcile: how long it took, the outcome and when the template
// is looked at next.
func logEnd(ctx context.Context, t *v1alpha1.StackTemplate, start time.Time, res ctrl.Result) {
	ctrl.LoggerFrom(ctx).Info("Reconciled StackTemplate", "duration", time.Since(start).Round(time.Millisecond),
		"generation", t.Generation, "ready", conditions.IsTrue(t, pulumiv1.ConditionReady), "requeueAfter", res.RequeueAfter)
}
