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

func (r *recordingRunner) ReportRunning(context.Context, *v1alpha1.Update, *v1alpha1.Update) error {
	return nil
}

func (r *recordingRunner) Record(context.Context, *v1alpha1.Update, *v1alpha1.Update, engine.Result) error {
	return nil
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

func (blockingRunner) ReportRunning(context.Context, *v1alpha1.Update, *v1alpha1.Update) error {
	return nil
}

func (blockingRunner) Record(context.Context, *v1alpha1.Update, *v1alpha1.Update, engine.Result) error {
	return nil
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

func (r *lostAnswerRunner) ReportRunning(context.Context, *v1alpha1.Update, *v1alpha1.Update) error {
	return nil
}

func (r *lostAnswerRunner) Record(context.Context, *v1alpha1.Update, *v1alpha1.Update, engine.Result) error {
	return nil
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

// writingRunner writes to the Update what the runner writes, through c, and lists the
// writes; its engine run is run.
type writingRunner struct {
	c   client.Client
	run func(ctx context.Context, u *v1alpha1.Update)

	mu     sync.Mutex
	writes []string
	ran    int
}

func (r *writingRunner) wrote(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, what)
}

func (r *writingRunner) Claim(ctx context.Context, u *v1alpha1.Update, runner string) (bool, error) {
	if u.Status.Phase != "" && u.Status.Phase != v1alpha1.UpdatePhasePending {
		return false, nil
	}
	base := u.DeepCopy()
	u.MarkRunning(runner, metav1.Now())
	if err := r.c.Status().Patch(ctx, u, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, err
	}
	r.wrote("claim")
	return true, nil
}

func (r *writingRunner) ReportRunning(ctx context.Context, base, u *v1alpha1.Update) error {
	if err := r.c.Status().Patch(ctx, u, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	r.wrote("running")
	return nil
}

func (r *writingRunner) Record(ctx context.Context, base, u *v1alpha1.Update, _ engine.Result) error {
	if err := r.c.Status().Patch(ctx, u, client.MergeFrom(base)); err != nil {
		return err
	}
	r.wrote("result")
	return nil
}

func (r *writingRunner) Run(ctx context.Context, u *v1alpha1.Update) error {
	base := u.DeepCopy()
	res, _ := r.Execute(ctx, u)
	return r.Record(ctx, base, u, res)
}

func (r *writingRunner) Execute(ctx context.Context, u *v1alpha1.Update) (engine.Result, error) {
	r.mu.Lock()
	r.ran++
	r.mu.Unlock()
	if r.run != nil {
		r.run(ctx, u)
	}
	now := metav1.Now()
	u.Status.Phase, u.Status.Result, u.Status.EndTime = v1alpha1.UpdatePhaseSucceeded, v1alpha1.UpdateResultSucceeded, &now
	u.MarkFinished(metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSucceeded})
	return engine.Result{}, nil
}

func (r *writingRunner) runs() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ran, slices.Clone(r.writes)
}

// staleReader answers every read of an Update with stale, as a cache that has not caught
// up would.
type staleReader struct {
	client.Reader
	stale *v1alpha1.Update
}

func (r staleReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.stale.DeepCopyInto(obj.(*v1alpha1.Update))
	return nil
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// An Update bound to the executor at its creation starts without a claim: a run shorter
// than ReportRunningAfter writes only its result (with who ran it and when it started), a
// longer one says Running first. An Update bound to a runner that is gone, or to none, is
// claimed as before.
func TestExecutor_Start_BoundUpdateWritesNoClaim(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	const self = "self"
	tests := []struct {
		name   string
		runner string
		// long runs until the stored Update reads Running.
		long bool
		want []string
	}{
		{name: "ShortBoundRun", runner: self, want: []string{"result"}},
		{name: "LongBoundRun", runner: self, long: true, want: []string{"running", "result"}},
		{name: "BoundToAGoneRunner", runner: "local/gone/1/abcdef", want: []string{"claim", "result"}},
		{name: "Unbound", want: []string{"claim", "result"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "u"}, Spec: v1alpha1.UpdateSpec{StackName: "s", Type: v1alpha1.UpdateTypeUp}}
			c := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1alpha1.Update{}).Build()
			r := &writingRunner{c: c}
			e := New(c, r, 1)
			e.ReportRunningAfter = time.Hour
			if tt.long {
				e.ReportRunningAfter = 10 * time.Millisecond
				r.run = func(ctx context.Context, _ *v1alpha1.Update) {
					// Bounded: a report that never comes fails the test on its writes.
					for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
						got := &v1alpha1.Update{}
						if c.Get(ctx, client.ObjectKeyFromObject(u), got) == nil && got.Status.Phase == v1alpha1.UpdatePhaseRunning {
							return
						}
					}
				}
			}
			u.Spec.Runner = tt.runner
			if tt.runner == self {
				u.Spec.Runner = e.Identity()
			}
			if err := c.Create(t.Context(), u); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _ = e.Start(ctx) }()
			e.Submit(u)
			waitFor(t, "the result", func() bool { _, w := r.runs(); return len(w) == len(tt.want) })
			if _, writes := r.runs(); !cmp.Equal(tt.want, writes) {
				t.Errorf("writes (-want +got):\n%s", cmp.Diff(tt.want, writes))
			}
			got := &v1alpha1.Update{}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(u), got); err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != v1alpha1.UpdatePhaseSucceeded || got.Status.Runner != e.Identity() || got.Status.StartTime == nil {
				t.Errorf("stored status: phase %s, runner %q, start %v; want Succeeded, run by %q, with its start", got.Status.Phase, got.Status.Runner, got.Status.StartTime, e.Identity())
			}
		})
	}
}

// A bound Update is never started twice by its executor, however stale the Updates it
// reads: submitted again once it ran, and still read Pending, it does not run again. Its
// result also clears the queue position the Update controller wrote as it started.
func TestExecutor_Start_BoundUpdateRunsOnceOnStaleReads(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1alpha1.Update{}).Build()
	r := &writingRunner{c: c}
	u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "u"}, Spec: v1alpha1.UpdateSpec{StackName: "s", Type: v1alpha1.UpdateTypeUp}}
	e := New(staleReader{stale: u}, r, 1)
	u.Spec.Runner = e.Identity()
	// What is stored: the Update with the queue position written after the executor read
	// it.
	stored := u.DeepCopy()
	if err := c.Create(t.Context(), stored); err != nil {
		t.Fatal(err)
	}
	stored.Status.Queue = &v1alpha1.UpdateQueue{Ahead: 1, Reason: v1alpha1.QueueReasonAllSlotsBusy, Slots: 1}
	if err := c.Status().Update(t.Context(), stored); err != nil {
		t.Fatal(err)
	}
	u.ResourceVersion = stored.ResourceVersion
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = e.Start(ctx) }()
	e.Submit(u)
	waitFor(t, "the result", func() bool { _, w := r.runs(); return len(w) == 1 })
	e.Submit(u)
	waitFor(t, "the executor to take it again", func() bool { q, running := e.Pending(); return q == 0 && running == 0 })
	time.Sleep(100 * time.Millisecond)
	if ran, writes := r.runs(); ran != 1 || !cmp.Equal([]string{"result"}, writes) {
		t.Errorf("ran %d times, wrote %v; want once, only its result", ran, writes)
	}
	got := &v1alpha1.Update{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(u), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Queue != nil || got.Status.Phase != v1alpha1.UpdatePhaseSucceeded {
		t.Errorf("stored status: phase %s, queue %+v; want Succeeded with no queue position", got.Status.Phase, got.Status.Queue)
	}
}
