package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/executor"
)

// recordingRunner stands in for the runner: it records which Updates overlap in time.
type recordingRunner struct {
	mu          sync.Mutex
	running     map[string]bool // by Stack
	maxParallel int
	overlaps    []string // Stacks seen running twice at once
	perNS       map[string]int
	mostPerNS   map[string]int // most Updates of each namespace running at once
	order       []string
	release     chan struct{}
}

func newRecordingRunner(release chan struct{}) *recordingRunner {
	return &recordingRunner{running: map[string]bool{}, perNS: map[string]int{}, mostPerNS: map[string]int{}, release: release}
}

func (r *recordingRunner) runningCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}

func (r *recordingRunner) ran() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order)
}

// runAll starts e, lets the pool fill (so that its bounds are what is measured), releases
// n runs one at a time, and stops e.
func runAll(t *testing.T, e *Executor, r *recordingRunner, n int, submit func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Start(ctx) }()
	submit()
	deadline := time.Now().Add(10 * time.Second)
	for r.runningCount() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for range n {
		select {
		case r.release <- struct{}{}:
		case <-time.After(10 * time.Second):
			cancel()
			t.Fatalf("executor stalled; order so far %v", r.ran())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func (r *recordingRunner) Claim(context.Context, *v1alpha1.Update, string) (bool, error) {
	return true, nil
}

func (r *recordingRunner) Run(ctx context.Context, u *v1alpha1.Update) error {
	_, err := r.Execute(ctx, u)
	return err
}

func (r *recordingRunner) Execute(_ context.Context, u *v1alpha1.Update) (engine.Result, error) {
	r.mu.Lock()
	if r.running[u.Spec.StackName] {
		r.overlaps = append(r.overlaps, u.Spec.StackName)
	}
	r.running[u.Spec.StackName] = true
	r.order = append(r.order, u.Name)
	r.maxParallel = max(r.maxParallel, len(r.running))
	r.perNS[u.Namespace]++
	r.mostPerNS[u.Namespace] = max(r.mostPerNS[u.Namespace], r.perNS[u.Namespace])
	r.mu.Unlock()
	<-r.release
	r.mu.Lock()
	delete(r.running, u.Spec.StackName)
	r.perNS[u.Namespace]--
	r.mu.Unlock()
	u.Status.Phase = v1alpha1.UpdatePhaseSucceeded
	return engine.Result{}, nil
}

func TestExecutor_Start_BoundsParallelismAndSerialisesEachStack(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	var updates []*v1alpha1.Update
	// Six Updates over three Stacks, two each, submitted stack by stack.
	for i := range 6 {
		updates = append(updates, &v1alpha1.Update{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("u%d", i)},
			Spec:       v1alpha1.UpdateSpec{StackName: fmt.Sprintf("s%d", i/2), Type: v1alpha1.UpdateTypeUp},
		})
	}
	b := fake.NewClientBuilder().WithScheme(s)
	for _, u := range updates {
		b = b.WithObjects(u.DeepCopy())
	}
	r := newRecordingRunner(make(chan struct{}))
	e := New(b.Build(), r, 2)
	runAll(t, e, r, len(updates), func() {
		for _, u := range updates {
			e.Submit(u)
			e.Submit(u) // duplicates are ignored
		}
	})
	if r.maxParallel != 2 {
		t.Errorf("at most %d Updates ran at once; want exactly the pool size 2", r.maxParallel)
	}
	if len(r.overlaps) > 0 {
		t.Errorf("Stacks %v ran two Updates at once", r.overlaps)
	}
	// The two workers start in either order; what matters is which two ran first.
	first := slices.Sorted(slices.Values(r.order[:2]))
	if diff := cmp.Diff([]string{"u0", "u2"}, first); diff != "" {
		t.Errorf("first two runs (-want +got): %s; the second Update of s0 must wait while s1 is free", diff)
	}
	if len(r.order) != len(updates) {
		t.Errorf("ran %v; want each of the %d Updates once", r.order, len(updates))
	}
}

func TestExecutor_RunDetached_ResultReadOnceFinished(t *testing.T) {
	r := newRecordingRunner(make(chan struct{}, 1))
	e := New(fake.NewClientBuilder().Build(), r, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = e.Start(ctx) }()

	u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d"}, Spec: v1alpha1.UpdateSpec{StackName: "s", Type: v1alpha1.UpdateTypeDestroy}}
	e.RunDetached(t.Context(), u)
	if got, ok := e.Detached("ns", "d"); !ok || got.Status.Finished() {
		t.Fatalf("Detached() right after submission = %v, %v; want an unfinished Update", got, ok)
	}
	r.release <- struct{}{}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, ok := e.Detached("ns", "d")
		if !ok {
			t.Fatal("detached Update forgotten before its result was read")
		}
		if got.Status.Finished() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("detached Update never finished")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := e.Detached("ns", "d"); ok {
		t.Errorf("a finished detached Update is still held after its result was read")
	}
}

// blockingRunner runs until its context ends, and reports why it ended.
type blockingRunner struct{ cause chan error }

func (blockingRunner) Claim(context.Context, *v1alpha1.Update, string) (bool, error) {
	return true, nil
}

func (r blockingRunner) Run(ctx context.Context, u *v1alpha1.Update) error {
	_, err := r.Execute(ctx, u)
	return err
}

func (r blockingRunner) Execute(ctx context.Context, _ *v1alpha1.Update) (engine.Result, error) {
	<-ctx.Done()
	r.cause <- context.Cause(ctx)
	return engine.Result{}, ctx.Err()
}

// A run that never ends on its own is cancelled at the deadline, which the cause names;
// the worker is then free for the next Update.
func TestExecutor_Start_DeadlineCancelsAHangingRun(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	hang := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hang"}, Spec: v1alpha1.UpdateSpec{StackName: "s", Type: v1alpha1.UpdateTypeUp}}
	next := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "next"}, Spec: v1alpha1.UpdateSpec{StackName: "t", Type: v1alpha1.UpdateTypeUp}}
	r := blockingRunner{cause: make(chan error, 2)}
	e := New(fake.NewClientBuilder().WithScheme(s).WithObjects(hang.DeepCopy(), next.DeepCopy()).Build(), r, 1)
	e.Deadline = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = e.Start(ctx) }()
	e.Submit(hang)
	e.Submit(next)
	for _, name := range []string{"hang", "next"} {
		select {
		case cause := <-r.cause:
			if cause == nil || !strings.Contains(cause.Error(), "exceeded the deadline of 50ms (--runner-deadline)") {
				t.Errorf("run %s ended with cause %v; want the deadline", name, cause)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("run %s was not cancelled at its deadline", name)
		}
	}
}

// lostAnswerRunner's first claim is applied, but its answer lost, as when the API server
// goes away between applying a request and replying to it.
type lostAnswerRunner struct {
	client client.Client
	claims int
	ran    chan string
}

func (r *lostAnswerRunner) Claim(ctx context.Context, u *v1alpha1.Update, runner string) (bool, error) {
	r.claims++
	if u.Status.Phase != "" {
		return false, nil
	}
	u.MarkRunning(runner, metav1.Now())
	if err := r.client.Status().Update(ctx, u); err != nil {
		return false, err
	}
	if r.claims == 1 {
		return false, errors.New("read: connection reset by peer")
	}
	return true, nil
}

func (r *lostAnswerRunner) Run(ctx context.Context, u *v1alpha1.Update) error {
	_, err := r.Execute(ctx, u)
	return err
}

func (r *lostAnswerRunner) Execute(_ context.Context, u *v1alpha1.Update) (engine.Result, error) {
	r.ran <- u.Name
	return engine.Result{}, nil
}

// The first claim of an Update reached the API server, which went away before answering:
// the retry finds the Update Running under this executor, and runs it (once), instead of
// taking it for someone else's and leaving it Running forever.
func TestExecutor_Start_ClaimAppliedButAnswerLostRunsOnce(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "u"}, Spec: v1alpha1.UpdateSpec{StackName: "s", Type: v1alpha1.UpdateTypeUp}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(u.DeepCopy()).WithStatusSubresource(&v1alpha1.Update{}).Build()
	r := &lostAnswerRunner{client: c, ran: make(chan string, 2)}
	e := New(c, r, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = e.Start(ctx) }()
	e.Submit(u)
	select {
	case <-r.ran:
	case <-time.After(executor.ClaimRetry + 10*time.Second):
		t.Fatal("the Update whose claim was applied never ran")
	}
	// Submitted again (the Update controller does, on any event): not run twice.
	e.Submit(u)
	select {
	case name := <-r.ran:
		t.Fatalf("Update %s ran twice", name)
	case <-time.After(executor.ClaimRetry + time.Second):
	}
}

// A namespace that queued first, and more, does not take every worker: the other
// namespace's Update starts on the second worker, and the first never runs two at once.
func TestExecutor_Start_MaxPerNamespaceLeavesWorkersToOtherNamespaces(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	var updates []*v1alpha1.Update
	for _, name := range []string{"a0", "a1", "a2", "b0"} {
		ns := name[:1]
		updates = append(updates, &v1alpha1.Update{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			// A Stack each: only the namespace's limit holds them back.
			Spec: v1alpha1.UpdateSpec{StackName: name, Type: v1alpha1.UpdateTypeUp},
		})
	}
	b := fake.NewClientBuilder().WithScheme(s)
	for _, u := range updates {
		b = b.WithObjects(u.DeepCopy())
	}
	r := newRecordingRunner(make(chan struct{}))
	e := New(b.Build(), r, 2)
	e.MaxPerNamespace = 1
	runAll(t, e, r, len(updates), func() {
		for _, u := range updates {
			e.Submit(u)
		}
	})
	first := slices.Sorted(slices.Values(r.order[:2]))
	if diff := cmp.Diff([]string{"a0", "b0"}, first); diff != "" {
		t.Errorf("first two runs (-want +got): %s; b's Update must not wait behind a's backlog", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1}, r.mostPerNS); diff != "" {
		t.Errorf("most Updates running at once per namespace (-want +got): %s", diff)
	}
}
