package rollout

import (
	"context"
	"errors"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/kit"
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/metrics"
	"github.com/stackwright/stackwright/internal/urlallow"
)

// FieldManager owns what this controller writes: the rollouts' status, their gate Jobs and
// the reconcile requests a resume sets on failed Stacks.
const FieldManager = "stackwright-rollout-controller"

// Events recorded on StackRollouts. Each announces a transition, and is emitted once the
// status that records it is written.
const (
	EventRolloutStarted   = "RolloutStarted"
	EventWaveStarted      = "WaveStarted"
	EventWaveReady        = "WaveReady"
	EventGateStarted      = "GateStarted"
	EventWavePassed       = "WavePassed"
	EventAwaitPromotion   = "AwaitingPromotion"
	EventPromoted         = "Promoted"
	EventRolloutHalted    = "RolloutHalted"
	EventRolloutResumed   = "RolloutResumed"
	EventRolloutAborted   = "RolloutAborted"
	EventRolloutSucceeded = "RolloutSucceeded"
	EventRequestIgnored   = "RequestIgnored"
	EventRolloutPaused    = "RolloutPaused"
	EventSuperseded       = "RevisionSuperseded"
	EventWavePreviewed    = "WavePreviewed"
	EventRolloutUnpaused  = "RolloutUnpaused"
	// EventMetricGateURLNotAllowed announces that a metric gate's URL stalls the rollout.
	EventMetricGateURLNotAllowed = "MetricGateURLNotAllowed"
	eventAction                  = "Rollout"
)

// +kubebuilder:rbac:groups=stackwright.dev,resources=stackrollouts,verbs=get;list;watch
// +kubebuilder:rbac:groups=stackwright.dev,resources=stackrollouts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=stackwright.dev,resources=updates,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=get;list;watch;patch

// Reconciler moves each StackRollout's target revision through its waves.
type Reconciler struct {
	Client client.Client
	// APIReader reads what the manager's cache trims: the steps of a preview Update the
	// preview gate judges. Nil: Client.
	APIReader client.Reader
	// HTTPClient queries the Prometheus servers of metric gates. Nil: a client with
	// http.DefaultTransport (each query is bounded by a timeout of its own). Its redirects
	// are followed only within MetricGateURLs.
	HTTPClient *http.Client
	// MetricGateURLs are the URL prefixes metric gates may query (--metric-gate-urls). Its
	// zero value allows none: whoever writes a StackRollout would otherwise have the
	// manager send requests anywhere it reaches.
	MetricGateURLs urlallow.List
	Recorder       events.EventRecorder
	// Now is the clock, read once per reconcile; tests replace it.
	Now func() time.Time
	// Templates is set when the install serves StackTemplates (and may read them): only
	// then are rollouts of template revisions served.
	Templates bool
}

// Reconcile implements reconcile.Reconciler: get, defer the status patch (and the events
// that announce it), then one step of the rollout's state machine as ordered phases.
// Deleting a rollout needs no finalizer: its Stacks simply deploy what their source offers
// again, as without a rollout.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	start := time.Now()
	ro := &v1alpha1.StackRollout{}
	if err := r.Client.Get(ctx, req.NamespacedName, ro); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.ForgetRollout(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ro.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	s := &scope{ro: ro, now: r.now(), judge: judge, events: kit.NewEvents(r.Recorder, eventAction)}
	p := patch.New(r.Client, ro, "StackRollout", FieldManager)
	defer func() {
		finalizeStatus(ro)
		err := p.Status(ctx, ro)
		if err != nil {
			retErr = errors.Join(retErr, err)
		}
		// After the patch: an event must not announce a state that was never recorded.
		s.events.Flush(err)
		observe(ctx, ro, start, result)
	}()
	return s.run(ctx,
		r.selectStacks,
		checkSources,
		r.offer,
		r.handleRequests,
		checkPause,
		r.checkMetricGates,
		chooseTarget,
		r.progressWaves,
	)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// observe records the rollout's metrics and logs one line per reconcile: how long it took,
// where the rollout stands and when it is looked at next.
func observe(ctx context.Context, ro *v1alpha1.StackRollout, start time.Time, res ctrl.Result) {
	st := &ro.Status
	metrics.ObserveRollout(ro.Namespace, ro.Name, string(st.Phase), int(st.Wave), st.Phase == v1alpha1.RolloutHalted)
	ctrl.LoggerFrom(ctx).Info("Reconciled StackRollout", "duration", time.Since(start).Round(time.Millisecond),
		"phase", st.Phase, "wave", st.WaveName, "updated", st.Updated, "stacks", st.Stacks, "requeueAfter", res.RequeueAfter)
}
