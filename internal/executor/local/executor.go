package local

import (
	"context"
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
}

// job is a submitted Update and the Stack it runs on ("namespace/name").
type job struct {
	update types.NamespacedName
	stack  string
	// detached is set for Updates that exist only in memory.
	detached *v1alpha1.Update
}

// Executor is a local executor.
type Executor struct {
	// Deadline bounds one run (0: unbounded): past it the engine is cancelled and the
	// Update fails as Cancelled, to be retried with backoff. Without it a program that
	// hangs would hold one of the workers for ever, and a few of them the whole fleet.
	Deadline time.Duration

	client   client.Reader
	claims   executor.Claims
	runner   Runner
	workers  int
	identity string

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []job                           // submitted, not started; FIFO
	queued  map[types.NamespacedName]bool   // members of queue
	running map[types.NamespacedName]string // Update → Stack key, while running
	busy    map[string]bool                 // Stack keys with an Update running
	stopped bool

	// detached holds in-memory Updates from submission until their result is read.
	detached map[types.NamespacedName]*v1alpha1.Update
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
	e := &Executor{
		client: c, runner: r, workers: max(workers, 1),
		identity: fmt.Sprintf("local/%s/%d/%s", host, os.Getpid(), rand.String(6)),
		queued:   map[types.NamespacedName]bool{},
		running:  map[types.NamespacedName]string{},
		busy:     map[string]bool{},
		detached: map[types.NamespacedName]*v1alpha1.Update{},
	}
	e.cond = sync.NewCond(&e.mu)
	return e
}

// Identity is the runner name this executor writes into the Updates it runs.
func (e *Executor) Identity() string { return e.identity }

// Submit implements executor.Executor.
func (e *Executor) Submit(u *v1alpha1.Update) { e.enqueue(u, nil) }

// RunDetached implements executor.Detacher.
func (e *Executor) RunDetached(u *v1alpha1.Update) {
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
	e.push(job{update: client.ObjectKeyFromObject(u), stack: u.Namespace + "/" + u.Spec.StackName, detached: detached})
}

func (e *Executor) push(j job) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped || e.queued[j.update] || e.running[j.update] != "" {
		return
	}
	e.queued[j.update] = true
	e.queue = append(e.queue, j)
	e.cond.Signal()
}

func (e *Executor) retryLater(j job) {
	time.AfterFunc(executor.ClaimRetry, func() { e.push(j) })
}

// Owns implements executor.Executor: this process's runs are alive as long as it is.
func (e *Executor) Owns(runner string) bool { return runner == e.identity }

// Start runs the workers until ctx is done, then waits for running Updates to record
// their (cancelled) results. It implements manager.Runnable; it runs only on the leader.
func (e *Executor) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range e.workers {
		wg.Go(func() { e.work(ctx) })
	}
	<-ctx.Done()
	e.mu.Lock()
	e.stopped = true
	e.cond.Broadcast()
	e.mu.Unlock()
	wg.Wait()
	return nil
}

// next blocks until an Update whose Stack is idle is queued, and reserves its Stack.
func (e *Executor) next() (job, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		if e.stopped {
			return job{}, false
		}
		for i, j := range e.queue {
			if e.busy[j.stack] {
				continue
			}
			delete(e.queued, j.update)
			e.queue = append(e.queue[:i], e.queue[i+1:]...)
			e.busy[j.stack] = true
			e.running[j.update] = j.stack
			return j, true
		}
		e.cond.Wait()
	}
}

func (e *Executor) release(u types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.busy, e.running[u])
	delete(e.running, u)
	e.cond.Broadcast()
}

func (e *Executor) work(ctx context.Context) {
	for {
		j, ok := e.next()
		if !ok {
			return
		}
		if j.detached != nil {
			e.executeDetached(ctx, j.detached)
		} else {
			e.execute(ctx, j)
		}
		e.release(j.update)
	}
}

func (e *Executor) execute(ctx context.Context, j job) {
	key := j.update
	log := ctrl.LoggerFrom(ctx).WithValues("update", key.String())
	ctx = ctrl.LoggerInto(ctx, log)
	u := &v1alpha1.Update{}
	if err := e.client.Get(ctx, key, u); err != nil {
		if apierrors.IsNotFound(err) {
			e.claims.Forget(key)
			return
		}
		log.Error(err, "Failed to get Update; trying again", "after", executor.ClaimRetry.String())
		e.retryLater(j)
		return
	}
	claimed, err := e.claims.Claim(ctx, u, e.identity, e.runner.Claim)
	if err != nil || !claimed {
		if err != nil {
			log.Error(err, "Failed to claim Update; trying again", "after", executor.ClaimRetry.String())
			e.retryLater(j)
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

// Pending reports how many Updates are queued and running, for metrics and tests.
func (e *Executor) Pending() (queued, running int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.queue), len(e.running)
}
