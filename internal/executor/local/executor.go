package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/crashpoint"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/executor"
)

// Runner is what the executor needs of *runner.Runner.
type Runner interface {
	Claim(ctx context.Context, u *v1alpha1.Update, runner string) (bool, error)
	Run(ctx context.Context, u *v1alpha1.Update) error
	Execute(ctx context.Context, u *v1alpha1.Update) (engine.Result, error)
	ReportRunning(ctx context.Context, base, u *v1alpha1.Update) error
	Record(ctx context.Context, base, u *v1alpha1.Update, res engine.Result) error
}

// DefaultReportRunningAfter is how long an Update bound to the executor runs before its
// status says Running. Most runs end sooner, and each status write is a write to etcd: a
// short run's only status write is its result.
const DefaultReportRunningAfter = 10 * time.Second

// ranRetention is how long the executor remembers a bound Update it ran after its result
// was recorded: long past any lag of the cache it reads Updates from.
const ranRetention = 10 * time.Minute

// job is a submitted Update: the queue item's value.
type job struct {
	// detached is set for Updates that exist only in memory.
	detached *v1alpha1.Update
}

// Executor is a local executor.
type Executor struct {
	// Deadline bounds one run (0: unbounded): past it the engine is cancelled and the
	// Update fails as Cancelled, to be retried with backoff. Without it a program that
	// hangs would hold one of the workers for ever, and a few of them the whole fleet.
	Deadline time.Duration
	// MaxPerNamespace bounds the Updates of one namespace running at once (0: only the
	// workers bound them), so that one tenant cannot take every worker. Set it before
	// Start.
	MaxPerNamespace int
	// Tenant names the namespace an Update's run counts against for MaxPerNamespace; nil
	// means the Update's own.
	Tenant executor.TenantOf
	// ReportRunningAfter is how long an Update bound to the executor runs before it is
	// reported Running; 0 means DefaultReportRunningAfter.
	ReportRunningAfter time.Duration

	client   client.Reader
	claims   executor.Claims
	runner   Runner
	workers  int
	identity string
	// queue serves the namespaces in turn; its group is the Stack ("namespace/name"), so
	// that two Updates of one Stack never run at once.
	queue *executor.Queue[job]

	mu sync.Mutex
	// detached holds in-memory Updates from submission until their result is read.
	detached map[types.NamespacedName]*v1alpha1.Update
	// ran holds, by UID, the Updates bound to this executor that it started: nothing on
	// the API server says a bound Update started until it is reported Running or its
	// result is in, and a cache that lags must not start it twice. The value is when its
	// result was recorded (zero until then: an entry whose result could not be recorded
	// is kept for good); entries go ranRetention after it.
	ran map[types.UID]time.Time
}

var (
	_ executor.Executor = (*Executor)(nil)
	_ executor.Detacher = (*Executor)(nil)
)

// New returns an executor running at most workers Updates at once. Its runner identity is
// unique to this process, so that after a restart the Updates the old process was running
// are recognisably orphaned.
func New(c client.Reader, r Runner, workers int) *Executor {
	host, _ := os.Hostname()
	workers = max(workers, 1)
	return &Executor{
		client: c, runner: r, workers: workers,
		identity: fmt.Sprintf("local/%s/%d/%s", host, os.Getpid(), rand.String(6)),
		queue:    executor.NewQueue[job](executor.Limits{Max: workers}),
		detached: map[types.NamespacedName]*v1alpha1.Update{},
		ran:      map[types.UID]time.Time{},
	}
}

// Identity is the runner name this executor writes into the Updates it runs, and the one
// the Stack controller binds the Updates it creates to (spec.runner).
func (e *Executor) Identity() string { return e.identity }

// Submit implements executor.Executor.
func (e *Executor) Submit(u *v1alpha1.Update) { e.enqueue(u, nil) }

// RunDetached implements executor.Detacher.
func (e *Executor) RunDetached(_ context.Context, u *v1alpha1.Update) {
	u = u.DeepCopy()
	e.mu.Lock()
	if _, ok := e.detached[client.ObjectKeyFromObject(u)]; ok {
		e.mu.Unlock()
		return
	}
	e.detached[client.ObjectKeyFromObject(u)] = u.DeepCopy()
	e.mu.Unlock()
	e.enqueue(u, u)
}

// Detached implements executor.Detacher.
func (e *Executor) Detached(namespace, name string) (*v1alpha1.Update, bool) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	e.mu.Lock()
	defer e.mu.Unlock()
	u, ok := e.detached[key]
	if !ok {
		return nil, false
	}
	if u.Status.Finished() {
		delete(e.detached, key)
	}
	return u.DeepCopy(), true
}

func (e *Executor) enqueue(u, detached *v1alpha1.Update) {
	e.queue.Push(executor.Item[job]{
		Key: client.ObjectKeyFromObject(u), Group: u.Namespace + "/" + u.Spec.StackName,
		Tenant: e.Tenant.Tenant(context.Background(), u), Value: job{detached: detached},
	})
}

func (e *Executor) retryLater(it executor.Item[job]) {
	time.AfterFunc(executor.ClaimRetry, func() { e.queue.Push(it) })
}

// Check implements executor.Executor: this process's runs are alive as long as it is, and
// end by recording their result; any other runner of the local executor was a process of
// a manager that has since stopped. (A Pending Update bound to such a runner is not lost
// but taken over: execute claims it.)
func (e *Executor) Check(_ context.Context, u *v1alpha1.Update) executor.Verdict {
	if u.Status.Runner == e.identity {
		return executor.Verdict{}
	}
	return executor.Verdict{Lost: "the manager it ran in stopped while the update was running"}
}

// Start runs the workers until ctx is done, then waits for running Updates to record
// their (cancelled) results. It implements manager.Runnable; it runs only on the leader.
func (e *Executor) Start(ctx context.Context) error {
	e.queue.SetLimits(executor.Limits{Max: e.workers, PerNamespace: e.MaxPerNamespace})
	var wg sync.WaitGroup
	for range e.workers {
		wg.Go(func() { e.work(ctx) })
	}
	wg.Wait()
	return nil
}

// work runs queued Updates until ctx is done; the Update in hand when it is done runs on
// and records its (cancelled) result first.
func (e *Executor) work(ctx context.Context) {
	for {
		it, ok := e.queue.Next(ctx)
		if !ok {
			return
		}
		if it.Value.detached != nil {
			e.executeDetached(ctx, it.Value.detached)
		} else {
			e.execute(ctx, it)
		}
		e.queue.Release(it.Key)
	}
}

func (e *Executor) execute(ctx context.Context, it executor.Item[job]) {
	key := it.Key
	log := ctrl.LoggerFrom(ctx).WithValues("update", key.String())
	ctx = ctrl.LoggerInto(ctx, log)
	u := &v1alpha1.Update{}
	if err := e.client.Get(ctx, key, u); err != nil {
		if apierrors.IsNotFound(err) {
			e.claims.Forget(key)
			return
		}
		log.Error(err, "Failed to get Update; trying again", "after", executor.ClaimRetry.String())
		e.retryLater(it)
		return
	}
	if u.Spec.Runner == e.identity {
		e.executeBound(ctx, u)
		return
	}
	// Not bound, or bound to a runner of a manager that stopped: whoever claims it runs it
	// (an up taken over first looks for its bound runner's run in the backend's history).
	claimed, err := e.claims.Claim(ctx, u, e.identity, e.runner.Claim)
	if err != nil || !claimed {
		if errors.Is(err, executor.ErrStaleRead) {
			log.V(1).Info("Update changed since it was read; claiming again shortly")
			e.retryLater(it)
			return
		}
		if err != nil {
			log.Error(err, "Failed to claim Update; trying again", "after", executor.ClaimRetry.String())
			e.retryLater(it)
		}
		return
	}
	crashpoint.Hit(crashpoint.ExecutorClaimed)
	start := time.Now()
	ctx, cancel := e.bound(ctx)
	defer cancel()
	if err := e.runner.Run(ctx, u); err != nil {
		log.Error(err, "Failed to run Update")
		return
	}
	log.V(1).Info("Ran update", "duration", time.Since(start).String())
}

// executeBound runs u, bound to this executor at its creation, without a claim: no other
// runner starts a Pending Update bound to a live one, and ran keeps this one from starting
// it twice. Its status says Running once it has run ReportRunningAfter; a shorter run's
// only status write is its result.
func (e *Executor) executeBound(ctx context.Context, u *v1alpha1.Update) {
	log := ctrl.LoggerFrom(ctx)
	if p := u.Status.Phase; (p != "" && p != v1alpha1.UpdatePhasePending) || !e.begin(u.UID) {
		// Finished, reported Running, or started already: this process ran it or runs it.
		return
	}
	crashpoint.Hit(crashpoint.ExecutorClaimed)
	base := u.DeepCopy()
	if base.Status.Queue == nil {
		// The result then clears a queue position the Update controller wrote as the run
		// began (its write is locked against the Update it read, which this write is not).
		base.Status.Queue = &v1alpha1.UpdateQueue{}
	}
	u.MarkRunning(e.identity, metav1.Now())
	start := time.Now()
	ctx, cancel := e.bound(ctx)
	defer cancel()
	report := e.reportRunning(ctx, base, u.DeepCopy())
	res, err := e.runner.Execute(ctx, u)
	if err != nil {
		res = engine.Result{}
	}
	if written := report.stop(); written != nil {
		// The result is patched over what the report wrote (a patch that carried the
		// resourceVersion read before it would be refused as stale).
		base, u.ResourceVersion = written, written.ResourceVersion
	}
	err = e.runner.Record(ctx, base, u, res)
	e.end(u.UID, err == nil)
	if err != nil {
		log.Error(err, "Failed to run Update")
		return
	}
	log.V(1).Info("Ran update", "duration", time.Since(start).String())
}

// begin records that this executor starts the bound Update uid, and reports false when it
// did already. It forgets the Updates whose results were recorded over ranRetention ago.
func (e *Executor) begin(uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, recorded := range e.ran {
		if !recorded.IsZero() && time.Since(recorded) > ranRetention {
			delete(e.ran, id)
		}
	}
	if _, ok := e.ran[uid]; ok {
		return false
	}
	e.ran[uid] = time.Time{}
	return true
}

// end records that the run of the bound Update uid is over; an entry whose result could
// not be recorded stays, since the API server still says the Update is Pending.
func (e *Executor) end(uid types.UID, recorded bool) {
	if !recorded {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ran[uid] = time.Now()
}

// runningReport writes, once ReportRunningAfter has passed, that a bound Update runs.
type runningReport struct {
	timer   *time.Timer
	mu      sync.Mutex
	stopped bool
	// written is the Update as the report wrote it, nil while not written.
	written *v1alpha1.Update
}

// reportRunning reports running (u marked Running, over base) unless the run ends first.
func (e *Executor) reportRunning(ctx context.Context, base, running *v1alpha1.Update) *runningReport {
	after := e.ReportRunningAfter
	if after <= 0 {
		after = DefaultReportRunningAfter
	}
	r := &runningReport{}
	r.timer = time.AfterFunc(after, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.stopped {
			return
		}
		if err := e.runner.ReportRunning(ctx, base, running); err != nil {
			// The result says it all the same.
			ctrl.LoggerFrom(ctx).Info("Failed to report Update running", "error", err.Error())
			return
		}
		r.written = running
	})
	return r
}

// stop cancels a report not yet written, waits for one being written, and returns the
// Update as written (nil if it was not).
func (r *runningReport) stop() *v1alpha1.Update {
	r.timer.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	return r.written
}

func (e *Executor) executeDetached(ctx context.Context, u *v1alpha1.Update) {
	log := ctrl.LoggerFrom(ctx).WithValues("update", client.ObjectKeyFromObject(u).String(), "detached", true)
	u.MarkRunning(e.identity, metav1.Now())
	e.storeDetached(u)
	ctx, cancel := e.bound(ctx)
	defer cancel()
	if _, err := e.runner.Execute(ctrl.LoggerInto(ctx, log), u); err != nil {
		log.Info("Detached update failed", "message", u.Status.Message)
	}
	e.storeDetached(u)
}

// bound applies Deadline to one run; the cause names it, for the Update's message.
func (e *Executor) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if e.Deadline <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, e.Deadline, fmt.Errorf("the run exceeded the deadline of %s (--runner-deadline)", e.Deadline))
}

func (e *Executor) storeDetached(u *v1alpha1.Update) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.detached[client.ObjectKeyFromObject(u)] = u.DeepCopy()
}

// Position implements executor.Positioner.
func (e *Executor) Position(key types.NamespacedName) (executor.Position, bool) {
	return e.queue.Position(key)
}

// Pending reports how many Updates are queued and running, for metrics and tests.
func (e *Executor) Pending() (queued, running int) { return e.queue.Pending() }
