package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/budget"
	"github.com/stackwright/stackwright/internal/clip"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/executor"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/plugincache"
	"github.com/stackwright/stackwright/internal/runner"
)

// fieldManager identifies the Job executor's writes.
const fieldManager = "stackwright-job-executor"

// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete

// Runner is what the executor needs of *runner.Runner: the manager resolves a run's
// inputs and records its result; the runner Pod only runs the engine.
type Runner interface {
	Claim(ctx context.Context, u *v1alpha1.Update, runner string) (bool, error)
	Request(ctx context.Context, u *v1alpha1.Update) (*pulumiv1.Stack, engine.Request, error)
	Record(ctx context.Context, base, u *v1alpha1.Update, res engine.Result) error
}

// Options configure the Job executor.
type Options struct {
	Pod PodOptions
	// MaxRunning bounds the runner Jobs running at once, cluster-wide.
	MaxRunning int
	// MaxRunningPerNamespace bounds them per namespace, so one tenant cannot take every
	// slot; 0 means MaxRunning.
	MaxRunningPerNamespace int
	// Tenant names the namespace an Update's run counts against for
	// MaxRunningPerNamespace; nil means the Update's own.
	Tenant executor.TenantOf
	// PendingTimeout is how long a runner Pod may stay Pending (unschedulable, its image
	// not pulled, ...) before its Update fails and frees its slot; 0 means 5 minutes.
	PendingTimeout time.Duration
	// BindAddress is where the runner API listens.
	BindAddress string
	// URL is how runners reach the runner API; empty means https://<cluster IP of
	// Service>:<port of BindAddress>.
	URL string
	// Service names the runner API's Service in Namespace, used when URL is empty.
	Service string
	// Namespace is the manager's namespace, where the runners of detached Updates run.
	Namespace string
	// DetachedTenantImages lets detached runs use the Stack's workspaceTemplate image
	// (PKO's custom source needs it); otherwise they run the runner image.
	DetachedTenantImages bool
	// DetachedServiceAccount, in Namespace, is what the runners of detached Updates run
	// as; empty means no detached Updates.
	DetachedServiceAccount string
	// CertDir keeps the runner API's certificate across restarts.
	CertDir string
	// LostGrace is how long a finished Job's Update may wait for its result (in flight
	// through the API) before it is declared lost.
	LostGrace time.Duration
	// Plugins, when set, is the plugin cache runners download the plugins they lack
	// through; Pod.PluginDownloads must then be set too.
	Plugins *plugincache.Cache
	// Memory is the manager's budget for tenant input in memory, which every runner report
	// is charged to while it is read and recorded; nil is no budget.
	Memory *budget.Budget
}

// Executor runs each Update in a Job of its own, in the Stack's namespace, as the Stack's
// ServiceAccount. It implements executor.Executor and manager.Runnable.
type Executor struct {
	client client.Client
	reader client.Reader
	claims executor.Claims
	runner Runner
	opts   Options
	server *server
	cert   []byte
	url    string
	now    func() time.Time

	// queue holds the Updates submitted and those whose Jobs are started and not
	// finished, which hold the slots.
	queue *executor.Queue[struct{}]

	mu sync.Mutex
	// detached holds the detached Updates, by namespace and name, until their Stacks read
	// their end.
	detached map[types.NamespacedName]*detachedRun
	// adopted is closed once the runners of a previous manager are adopted.
	adopted chan struct{}
}

var _ executor.Executor = (*Executor)(nil)

// New returns a Job executor; SetupWithManager registers it.
func New(c client.Client, reader client.Reader, r Runner, store *artifact.Store, o Options) (*Executor, error) {
	cert, certPEM, err := loadOrCreateCert(o.CertDir)
	if err != nil {
		return nil, err
	}
	if o.LostGrace == 0 {
		o.LostGrace = 30 * time.Second
	}
	if o.PendingTimeout == 0 {
		o.PendingTimeout = 5 * time.Minute
	}
	e := &Executor{
		client: c, reader: reader, runner: r, opts: o, cert: certPEM, url: o.URL, now: time.Now,
		queue:    executor.NewQueue[struct{}](executor.Limits{Max: o.MaxRunning, PerNamespace: o.MaxRunningPerNamespace}),
		detached: map[types.NamespacedName]*detachedRun{}, adopted: make(chan struct{}),
	}
	e.server = &server{
		client: c, reader: reader, store: store, cert: cert, addr: o.BindAddress, record: e.record, tokens: newTokenCache(),
		plugins: o.Plugins, memory: o.Memory,
		detachedNamespace: o.Namespace, detachedOfJob: e.detachedOfJob,
	}
	return e, nil
}

// SetupWithManager adds the executor and its runner API. The Update controller watches
// the runner Jobs, and asks Check about them.
func (e *Executor) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(e); err != nil {
		return err
	}
	return mgr.Add(e.server)
}

// Submit implements executor.Executor.
func (e *Executor) Submit(u *v1alpha1.Update) {
	e.queue.Push(e.item(context.Background(), u))
}

func (e *Executor) item(ctx context.Context, u *v1alpha1.Update) executor.Item[struct{}] {
	return executor.Item[struct{}]{Key: client.ObjectKeyFromObject(u), Tenant: e.opts.Tenant.Tenant(ctx, u)}
}

// Start implements manager.Runnable. It counts the runners still running from before a
// restart, then starts Jobs as slots free up, and sweeps for runners whose Job vanished.
func (e *Executor) Start(ctx context.Context) error {
	if e.url == "" {
		url, err := e.discoverURL(ctx)
		if err != nil {
			return err
		}
		e.url = url
	}
	err := e.adopt(ctx)
	if err == nil {
		err = e.adoptDetached(ctx)
	}
	close(e.adopted)
	if err != nil {
		return err
	}
	log := ctrl.LoggerFrom(ctx).WithName("job-executor")
	log.Info("Starting Job executor", "runnerAPI", e.url, "maxRunning", e.opts.MaxRunning,
		"maxRunningPerNamespace", e.opts.MaxRunningPerNamespace, "pendingTimeout", e.opts.PendingTimeout.String())
	var wg sync.WaitGroup
	wg.Go(func() { e.sweep(ctx) })
	wg.Go(func() {
		// The queue hands out the slots, the namespaces in turn within its limits; each
		// Update holds its slot until its Job is over (release).
		for {
			it, ok := e.queue.Next(ctx)
			if !ok {
				return
			}
			if err := e.start(ctrl.LoggerInto(ctx, log.WithValues("update", it.Key.String())), it); err != nil {
				log.Error(err, "Failed to start runner", "update", it.Key.String())
			}
		}
	})
	wg.Wait()
	return nil
}

// Position implements executor.Positioner.
func (e *Executor) Position(key types.NamespacedName) (executor.Position, bool) {
	return e.queue.Position(key)
}

// Pending reports how many Updates are queued and running (Jobs started and not
// finished), for metrics.
func (e *Executor) Pending() (queued, running int) { return e.queue.Pending() }

func (e *Executor) release(key types.NamespacedName) { e.queue.Release(key) }

func (e *Executor) retryLater(it executor.Item[struct{}]) {
	time.AfterFunc(executor.ClaimRetry, func() { e.queue.Push(it) })
}

// start claims the Update, then creates its work Secret and Job. The claim comes first:
// it is the one write that only one manager can win, so a Job is never created twice for
// an Update; a crash after it leaves a Running Update without a Job, which Check finds
// lost when the Update controller asks, and the Stack retries.
func (e *Executor) start(ctx context.Context, it executor.Item[struct{}]) error {
	key := it.Key
	if _, _, ok := e.detachedRunOf(key); ok {
		return e.startDetached(ctx, key)
	}
	u := &v1alpha1.Update{}
	if err := e.client.Get(ctx, key, u); err != nil {
		e.release(key)
		if apierrors.IsNotFound(err) {
			e.claims.Forget(key)
			return nil
		}
		e.retryLater(it)
		return fmt.Errorf("failed to get Update %s (trying again in %s): %w", key.Name, executor.ClaimRetry, err)
	}
	claimed, err := e.claims.Claim(ctx, u, runnerIdentity(u), e.runner.Claim)
	if err != nil || !claimed {
		e.release(key)
		if errors.Is(err, executor.ErrStaleRead) {
			ctrl.LoggerFrom(ctx).V(1).Info("Update changed since it was read; claiming again shortly", "update", key.Name)
			e.retryLater(it)
			return nil
		}
		if err != nil {
			e.retryLater(it)
			return fmt.Errorf("failed to claim Update %s (trying again in %s): %w", key.Name, executor.ClaimRetry, err)
		}
		return nil
	}
	if err := e.createJob(ctx, u); err != nil {
		e.release(key)
		return e.fail(ctx, u, err)
	}
	ctrl.LoggerFrom(ctx).Info("Started runner Job", "job", jobName(u))
	return nil
}

func (e *Executor) createJob(ctx context.Context, u *v1alpha1.Update) error {
	stack, req, err := e.runner.Request(ctx, u)
	if err != nil {
		return err
	}
	tmpl, err := parseWorkspaceTemplate(stack.Spec.WorkspaceTemplate, e.opts.Pod.Allowed)
	if err != nil {
		return fault.Stall(pulumiv1.ReasonSpecInvalid, "%v", err)
	}
	stale, err := e.goneRunners(ctx, u)
	if err != nil {
		return err
	}
	// Locks that earlier runners of this Stack, proven gone, left behind may be healed.
	req.StaleLockHosts = stale
	job, secret, err := buildJob(u, stack, e.newWork(u, req), e.cert, e.opts.Pod, tmpl, inStackNamespace(u))
	if err != nil {
		return err
	}
	if err := e.client.Create(ctx, secret, client.FieldOwner(fieldManager)); err != nil {
		return e.createFault(ctx, u, err, "work Secret", secret.Name)
	}
	if err := e.client.Create(ctx, job, client.FieldOwner(fieldManager)); err != nil {
		// The Update fails; its secrets must not wait for it to be pruned, nor reach a Job
		// whose creation did happen although its answer was lost.
		e.cleanup(ctx, u)
		return e.createFault(ctx, u, err, "runner Job", job.Name)
	}
	return nil
}

// newWork is what the runner of u is handed.
func (e *Executor) newWork(u *v1alpha1.Update, req engine.Request) *Work {
	return &Work{
		Namespace: u.Namespace, Update: u.Name, UpdateUID: string(u.UID),
		ArtifactDigest: u.Spec.ArtifactDigest, ProjectDir: u.Spec.ProjectDir, Revision: u.Spec.Revision,
		ManagerURL: e.url, Request: req,
	}
}

// createFault classifies a refused creation of one of u's runner objects. An object
// already under its name is never Stackwright's: createJob runs once per Update, after
// the claim that only one manager wins, and a restarted manager adopts the Jobs it finds
// running instead of creating them again. Anyone who sees the Update can compute the names
// and forge an owner reference, so such an object is refused, and left alone, rather than
// mounted as the work Secret or taken for the runner.
func (e *Executor) createFault(ctx context.Context, u *v1alpha1.Update, err error, what, name string) error {
	if !apierrors.IsAlreadyExists(err) {
		return apiFault(err, "failed to create %s %s", what, name)
	}
	f := fault.Stall(v1alpha1.ReasonPermanentFailure, "%s %s already exists and was not created by Stackwright for Update %s: Stackwright refuses to use it (delete it, or stop creating objects under that name)", what, name, u.Name)
	ctrl.LoggerFrom(ctx).Error(f, "Refused an object not created by Stackwright", "object", what, "name", name, "update", u.Name)
	return f
}

// apiFault classifies an API server's refusal to create a runner's objects: one that
// retrying cannot cure (the Job is invalid, e.g. a workspaceTemplate volume named like a
// runner's own; the manager may not create it there) stalls the Update's Stack, anything
// else (timeouts, throttling, a restarting API server) is transient and retried.
func apiFault(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	switch {
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err) && !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause), apierrors.IsBadRequest(err):
		return fault.Stall(v1alpha1.ReasonPermanentFailure, "%s: %v", what, err)
	default:
		return fault.Retry(v1alpha1.ReasonTransientFailure, "%s: %v", what, err)
	}
}

// goneRunners lists the host-name prefixes of the Stack's earlier runners that are proven
// gone: their Update is finished and no Pod of theirs is left that has not terminated. A
// runner killed mid-update leaves its lock in a self-managed backend; the next runner may
// remove exactly those locks. Pods are not cached, and this runs before every runner Job:
// one list of the Pods that carry any of those Updates' UID label (maxUIDsPerList a list)
// answers for all of them, rather than a list per Update of the Stack's --update-history.
func (e *Executor) goneRunners(ctx context.Context, u *v1alpha1.Update) ([]string, error) {
	var prev v1alpha1.UpdateList
	if err := e.client.List(ctx, &prev, client.InNamespace(u.Namespace), client.MatchingLabels{v1alpha1.StackLabel: u.Spec.StackName}); err != nil {
		return nil, fmt.Errorf("failed to list Updates of Stack %s: %w", u.Spec.StackName, err)
	}
	var ended []*v1alpha1.Update
	var uids []string
	for i := range prev.Items {
		p := &prev.Items[i]
		if p.UID == u.UID || !p.Status.Finished() || p.Status.Runner != runnerIdentity(p) {
			continue
		}
		ended = append(ended, p)
		uids = append(uids, string(p.UID))
	}
	if len(ended) == 0 {
		return nil, nil
	}
	alive := map[string]bool{}
	for chunk := range slices.Chunk(uids, maxUIDsPerList) {
		sel, err := labels.NewRequirement(LabelUpdateUID, selection.In, chunk)
		if err != nil {
			return nil, fmt.Errorf("failed to select runner Pods of Stack %s: %w", u.Spec.StackName, err)
		}
		var pods corev1.PodList
		if err := e.reader.List(ctx, &pods, client.InNamespace(u.Namespace), client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*sel)}); err != nil {
			return nil, fmt.Errorf("failed to list runner Pods of Stack %s: %w", u.Spec.StackName, err)
		}
		for _, pod := range pods.Items {
			if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
				alive[pod.Labels[LabelUpdateUID]] = true
			}
		}
	}
	var hosts []string
	for _, p := range ended {
		if !alive[string(p.UID)] {
			// Its Pod's host name is the Job's name (buildJob); a Pod made before that
			// was named, and so host-named, after it with a suffix.
			hosts = append(hosts, jobName(p))
		}
	}
	return hosts, nil
}

// maxUIDsPerList bounds the UIDs one list of runner Pods selects, and so its URL, whatever
// --update-history keeps.
const maxUIDsPerList = 64

// fail ends an Update that could not start, with the reason the error carries.
func (e *Executor) fail(ctx context.Context, u *v1alpha1.Update, cause error) error {
	base := u.DeepCopy()
	runner.Finish(u, engine.Result{}, cause, "", e.now())
	return e.runner.Record(ctx, base, u, engine.Result{})
}

// record applies a runner's reported result to its Update. It is called by the runner
// API for an authenticated runner of u.
func (e *Executor) record(ctx context.Context, u *v1alpha1.Update, res *Result) error {
	// The runner Pod is the Stack author's: its report is checked and held to bounds.
	if err := sanitizeResult(res, u.Status.StartTime, e.now()); err != nil {
		ctrl.LoggerFrom(ctx).Info("Refused runner's report", "update", u.Name, "reason", err.Error())
		res = refusedResult(res.UpdateUID, res.Status.LogTail, err)
		res.Status.EndTime = &metav1.Time{Time: e.now()}
	}
	st := res.Status
	base := u.DeepCopy()
	u = u.DeepCopy()
	// The runner reports the outcome; who ran it and when it started are the manager's.
	u.Status.Phase, u.Status.Result, u.Status.Message = st.Phase, st.Result, st.Message
	u.Status.LogTail, u.Status.Changes, u.Status.Permalink, u.Status.EndTime = st.LogTail, st.Changes, st.Permalink, st.EndTime
	u.Status.Steps, u.Status.StepsOmitted = st.Steps, st.StepsOmitted
	// sanitizeResult leaves exactly the Complete condition. MarkFinished also ends
	// Reconciling, and sets Stalled on a failure, as for a run of the local executor.
	c := st.Conditions[0]
	if c.Reason == v1alpha1.ReasonCancelled {
		// A runner cancels its run on SIGTERM: when the cluster disrupted its Pod (a
		// drain's eviction, a preemption), that is what the Update is to say.
		if why := e.disruption(ctx, u); why != "" {
			c.Reason, c.Message = v1alpha1.ReasonEvicted, why+"; the runner cancelled its run: "+c.Message
			u.Status.Message = c.Message
		}
	}
	u.MarkFinished(metav1.Condition{Status: c.Status, Reason: c.Reason, Message: c.Message})
	if e.isDetached(u) {
		// Nothing of a detached Update is stored: a destroy has no outputs to publish.
		e.finishDetached(ctx, u)
		return nil
	}
	var out engine.Result
	if st.Phase == v1alpha1.UpdatePhaseSucceeded {
		out = engine.Result{Outputs: res.Outputs, Plan: res.Plan, Steps: res.Steps}
	}
	if err := e.runner.Record(ctx, base, u, out); err != nil {
		return err
	}
	// The slot goes to the next Update as soon as the result is in; deleting the work
	// Secret (a read and a delete) need not hold it.
	e.release(client.ObjectKeyFromObject(u))
	e.cleanup(ctx, u)
	return nil
}

// disruption says how the cluster disrupted the runner Pod of u (its DisruptionTarget
// condition: evicted through the API, preempted, terminated by its kubelet), "" when it
// did not or cannot be read.
func (e *Executor) disruption(ctx context.Context, u *v1alpha1.Update) string {
	var pods corev1.PodList
	if err := e.reader.List(ctx, &pods, client.InNamespace(u.Namespace), client.MatchingLabels{LabelUpdateUID: string(u.UID)}); err != nil {
		return ""
	}
	for i := range pods.Items {
		if why := podDisruption(&pods.Items[i]); why != "" {
			return why
		}
	}
	return ""
}

// podDisruption says how the cluster disrupted Pod p, "" when no condition says it did.
func podDisruption(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return fmt.Sprintf("its runner Pod was evicted (%s: %s)", c.Reason, clip.Line(c.Message, maxReasonBytes))
		}
	}
	return ""
}

// cleanup deletes the work Secret as soon as the run is over: it holds the Stack's
// secrets. The Job stays for its TTL, for `kubectl logs`. A Secret of that name that u
// does not control is not Stackwright's to delete (createJob refused it).
func (e *Executor) cleanup(ctx context.Context, u *v1alpha1.Update) {
	log := ctrl.LoggerFrom(ctx)
	s := &corev1.Secret{}
	if err := e.reader.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: workSecretName(u)}, s); err != nil {
		if !apierrors.IsNotFound(err) {
			log.Error(err, "Failed to get work Secret", "secret", workSecretName(u))
		}
		return
	}
	if !metav1.IsControlledBy(s, u) {
		return
	}
	// The UID precondition spares a Secret made anew under the name since the read.
	if err := e.client.Delete(ctx, s, client.Preconditions{UID: &s.UID}); err != nil && !apierrors.IsNotFound(err) {
		log.Error(err, "Failed to delete work Secret", "secret", s.Name)
	}
}

// discoverURL finds the runner API Service's cluster IP: Pods in other namespaces reach
// it by IP whether or not the cluster runs DNS.
func (e *Executor) discoverURL(ctx context.Context) (string, error) {
	if e.opts.Service == "" || e.opts.Namespace == "" {
		return "", fmt.Errorf("the Job executor needs --runner-api-url, or --runner-api-service and the manager's namespace ($POD_NAMESPACE)")
	}
	svc := &corev1.Service{}
	if err := e.reader.Get(ctx, client.ObjectKey{Namespace: e.opts.Namespace, Name: e.opts.Service}, svc); err != nil {
		return "", fmt.Errorf("failed to get runner API Service %s/%s: %w", e.opts.Namespace, e.opts.Service, err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
		return "", fmt.Errorf("runner API Service %s/%s has no cluster IP and port", e.opts.Namespace, e.opts.Service)
	}
	return fmt.Sprintf("https://%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port), nil
}

// adopt counts the runner Jobs of a previous manager against the budget.
func (e *Executor) adopt(ctx context.Context) error {
	var list v1alpha1.UpdateList
	if err := e.client.List(ctx, &list); err != nil {
		return fmt.Errorf("failed to list Updates: %w", err)
	}
	for _, u := range list.Items {
		if u.Status.Phase == v1alpha1.UpdatePhaseRunning && u.Status.Runner == runnerIdentity(&u) && e.ownsStack(ctx, &u) {
			e.queue.Adopt(e.item(ctx, &u))
		}
	}
	return nil
}
