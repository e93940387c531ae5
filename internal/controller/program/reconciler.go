package program

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/crashpoint"
	"github.com/stackwright/stackwright/internal/source/program/project"
)

const (
	// ControllerName names the controller, its event reporter and its field manager.
	ControllerName = "program-controller"

	// FieldManager owns the status fields this controller writes.
	FieldManager = "stackwright-program-controller"

	// EventReasonArtifactReady: a generation was rendered into a new artifact.
	EventReasonArtifactReady = pulumiv1.ReasonArtifactReady
	// EventReasonSpecInvalid: a generation cannot be rendered as written.
	EventReasonSpecInvalid = pulumiv1.ReasonSpecInvalid
	// EventReasonStoreFailed: the artifact could not be written; the controller retries.
	EventReasonStoreFailed = "ArtifactStoreFailed"

	eventActionRender = "Render"
	eventActionStore  = "Store"
)

// +kubebuilder:rbac:groups=pulumi.com,resources=programs,verbs=get;list;watch
// +kubebuilder:rbac:groups=pulumi.com,resources=programs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler renders Programs into the artifact store.
type Reconciler struct {
	Client client.Client
	Store  *artifact.Store
	// Recorder emits events on transitions; SetupWithManager provides one when nil.
	Recorder events.EventRecorder
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// SetupWithManager registers the controller. Only spec changes (a new generation) trigger
// a render; status writes, including our own, do not.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder(ControllerName)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(opts).
		For(&pulumiv1.Program{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile renders the Program's current generation. It runs for every Program when the
// manager starts, even if the status already names an artifact: the store may be new
// (an emptyDir after a restart), and Put restores what it lacks.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	start := time.Now()
	prog := &pulumiv1.Program{}
	if err := r.Client.Get(ctx, req.NamespacedName, prog); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !prog.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := prog.DeepCopy()
	p := patch.New(r.Client, prog, "Program", FieldManager)
	defer func() {
		finalizeStatus(prog)
		if err := p.Status(ctx, prog); err != nil {
			retErr = errors.Join(retErr, err)
		} else {
			// After the patch: an event must not announce a state that was never recorded.
			r.emitTransition(before, prog)
		}
		ctrl.LoggerFrom(ctx).Info("Reconciled Program", "duration", time.Since(start).Round(time.Millisecond),
			"generation", prog.Generation, "ready", conditions.IsTrue(prog, pulumiv1.ConditionReady))
	}()
	return ctrl.Result{}, r.render(ctx, prog)
}

// render renders and stores the Program's current generation and records the outcome.
func (r *Reconciler) render(ctx context.Context, prog *pulumiv1.Program) error {
	log := ctrl.LoggerFrom(ctx)
	tarball, err := project.Tarball(prog)
	if err != nil {
		log.Info("Program cannot be rendered", "generation", prog.Generation, "error", err.Error())
		markStalled(prog, pulumiv1.ReasonSpecInvalid, err.Error())
		// Only a new generation can fix it, and that triggers a reconcile by itself.
		return nil
	}
	digest := artifact.Digest(tarball)
	if !r.Store.Has(digest) {
		if _, err := r.Store.Put(bytes.NewReader(tarball), project.MaxArtifactBytes); err != nil {
			markRetrying(prog, fmt.Sprintf("failed to store artifact %s: %v", digest, err))
			return fmt.Errorf("failed to store artifact %s: %w", digest, err)
		}
		log.V(1).Info("Stored artifact", "digest", digest, "size", len(tarball))
		crashpoint.Hit(crashpoint.ProgramArtifactStored)
	}
	res := rendered{digest: digest, revision: project.Revision(prog), size: int64(len(tarball)), path: artifact.RelPath(digest)}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	markReady(prog, res, metav1.NewTime(now()))
	return nil
}

// emitTransition records an event when the Ready condition changes (a new digest counts as
// a change, since the message names it); a retry loop repeating one failure stays quiet.
func (r *Reconciler) emitTransition(before, after *pulumiv1.Program) {
	if r.Recorder == nil {
		return
	}
	now := conditions.Get(after, pulumiv1.ConditionReady)
	if now == nil {
		return
	}
	if was := conditions.Get(before, pulumiv1.ConditionReady); was != nil &&
		was.Status == now.Status && was.Reason == now.Reason && was.Message == now.Message {
		return
	}
	switch {
	case now.Status == metav1.ConditionTrue:
		r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, EventReasonArtifactReady, eventActionRender, "%s", now.Message)
	case conditions.IsTrue(after, pulumiv1.ConditionStalled):
		r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, EventReasonSpecInvalid, eventActionRender, "%s", now.Message)
	default:
		r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, EventReasonStoreFailed, eventActionStore, "%s", now.Message)
	}
}
