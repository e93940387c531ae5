package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// tracker watches Stacks and Updates and records when each state was first observed, so
// that times are measured at the moment the API server announces them (ms precision)
// rather than at the seconds granularity of the objects' own timestamps.
type tracker struct {
	mu      sync.Mutex
	cond    *sync.Cond
	stacks  map[string]*stackSeen
	updates map[string]*updateSeen
}

type stackSeen struct {
	// ready maps the revision (status.lastUpdate.lastSuccessfulCommit) to the first time
	// the Stack was seen Ready on it.
	ready map[string]time.Time
	// last is the latest version seen.
	last *pulumiv1.Stack
}

type updateSeen struct {
	stack            string
	typ              v1alpha1.UpdateType
	seen, run, done  time.Time
	phase            v1alpha1.UpdatePhase
	reason, message  string
	created, started time.Time
	// ended is status.endTime, which like started has the API's one-second resolution.
	ended time.Time
}

func key(ns, name string) string { return ns + "/" + name }

// startTracker watches the given namespaces until ctx is done.
func startTracker(ctx context.Context, cfg *rest.Config, s *runtime.Scheme, namespaces ...string) (*tracker, error) {
	t := &tracker{stacks: map[string]*stackSeen{}, updates: map[string]*updateSeen{}}
	t.cond = sync.NewCond(&t.mu)
	nss := map[string]cache.Config{}
	for _, ns := range namespaces {
		nss[ns] = cache.Config{}
	}
	c, err := cache.New(cfg, cache.Options{Scheme: s, DefaultNamespaces: nss})
	if err != nil {
		return nil, fmt.Errorf("failed to create cache: %w", err)
	}
	for _, h := range []struct {
		obj client.Object
		fn  func(any)
	}{
		{&pulumiv1.Stack{}, t.onStack},
		{&v1alpha1.Update{}, t.onUpdate},
	} {
		inf, err := c.GetInformer(ctx, h.obj)
		if err != nil {
			return nil, fmt.Errorf("failed to watch %T: %w", h.obj, err)
		}
		fn := h.fn
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    fn,
			UpdateFunc: func(_, obj any) { fn(obj) },
		}); err != nil {
			return nil, err
		}
	}
	go func() { _ = c.Start(ctx) }()
	context.AfterFunc(ctx, t.wake)
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("failed to sync watch cache: %w", ctx.Err())
	}
	return t, nil
}

// isReady is kstatus Ready for the Stack's current generation.
func isReady(s *pulumiv1.Stack) bool {
	c := apimeta.FindStatusCondition(s.Status.Conditions, pulumiv1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == pulumiv1.ReasonProcessingCompleted &&
		c.ObservedGeneration == s.Generation && s.Status.ObservedGeneration == s.Generation
}

func (t *tracker) onStack(obj any) {
	s, ok := obj.(*pulumiv1.Stack)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	k := key(s.Namespace, s.Name)
	st := t.stacks[k]
	if st == nil {
		st = &stackSeen{ready: map[string]time.Time{}}
		t.stacks[k] = st
	}
	st.last = s
	if isReady(s) {
		rev := ""
		if s.Status.LastUpdate != nil {
			rev = s.Status.LastUpdate.LastSuccessfulCommit
		}
		if _, ok := st.ready[rev]; !ok {
			st.ready[rev] = now
		}
		if _, ok := st.ready[""]; !ok {
			st.ready[""] = now
		}
	}
	t.cond.Broadcast()
}

func (t *tracker) onUpdate(obj any) {
	u, ok := obj.(*v1alpha1.Update)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	k := key(u.Namespace, u.Name)
	us := t.updates[k]
	if us == nil {
		us = &updateSeen{stack: key(u.Namespace, u.Spec.StackName), typ: u.Spec.Type, seen: now, created: u.CreationTimestamp.Time}
		t.updates[k] = us
	}
	us.phase = u.Status.Phase
	if u.Status.StartTime != nil {
		us.started = u.Status.StartTime.Time
	}
	if u.Status.EndTime != nil {
		us.ended = u.Status.EndTime.Time
	}
	switch u.Status.Phase {
	case v1alpha1.UpdatePhaseRunning:
		if us.run.IsZero() {
			us.run = now
		}
	case v1alpha1.UpdatePhaseSucceeded, v1alpha1.UpdatePhaseFailed:
		if us.run.IsZero() {
			us.run = now // finished before we saw it running
		}
		if us.done.IsZero() {
			us.done = now
		}
		if c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete); c != nil {
			us.reason, us.message = c.Reason, c.Message
		}
	}
	t.cond.Broadcast()
}

// readyAt returns when the Stack was first seen Ready on rev ("" for any revision).
func (t *tracker) readyAt(ns, name, rev string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.stacks[key(ns, name)]
	if st == nil {
		return time.Time{}, false
	}
	if at, ok := st.ready[rev]; ok {
		return at, true
	}
	for r, at := range st.ready {
		if rev != "" && strings.Contains(r, rev) {
			return at, true
		}
	}
	return time.Time{}, false
}

// waitReady blocks until every named Stack of ns is Ready on rev, ctx ends or timeout
// passes; progress, if not nil, is called every interval with the count of Ready Stacks.
// It returns the number of Stacks Ready.
func (t *tracker) waitReady(ctx context.Context, ns string, names []string, rev string, timeout time.Duration,
	interval time.Duration, progress func(ready int),
) int {
	return t.waitStacks(ctx, ns, names, timeout, interval, progress, func(st *stackSeen) bool { return st.readyOn(rev) })
}

// waitStacks blocks until ok accepts every named Stack of ns, ctx ends or timeout passes;
// progress, if not nil, is called every interval with the count accepted. ok is called
// with the tracker locked. It returns the number of Stacks accepted.
func (t *tracker) waitStacks(ctx context.Context, ns string, names []string, timeout time.Duration,
	interval time.Duration, progress func(n int), ok func(*stackSeen) bool,
) int {
	keys := make([]string, len(names))
	for i, name := range names {
		keys[i] = key(ns, name)
	}
	return t.waitKeys(ctx, keys, timeout, interval, progress, ok)
}

// waitKeys is waitStacks for Stacks of any namespaces, named by key(namespace, name).
func (t *tracker) waitKeys(ctx context.Context, keys []string, timeout time.Duration,
	interval time.Duration, progress func(n int), ok func(*stackSeen) bool,
) int {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, t.wake)
	defer stop()
	go func() {
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				t.mu.Lock()
				n := t.countLocked(keys, ok)
				t.mu.Unlock()
				if progress != nil {
					progress(n)
				}
			}
		}
	}()
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		n := t.countLocked(keys, ok)
		if n == len(keys) || ctx.Err() != nil {
			return n
		}
		t.cond.Wait()
	}
}

func (t *tracker) countLocked(keys []string, ok func(*stackSeen) bool) int {
	n := 0
	for _, k := range keys {
		if st := t.stacks[k]; st != nil && ok(st) {
			n++
		}
	}
	return n
}

// readyOn reports whether the Stack was seen Ready on a revision containing rev (any
// revision when rev is ""), whatever the revision's spelling ("<sha>", "main@sha1:<sha>").
func (st *stackSeen) readyOn(rev string) bool {
	if _, ok := st.ready[rev]; ok {
		return true
	}
	for r := range st.ready {
		if rev != "" && strings.Contains(r, rev) {
			return true
		}
	}
	return false
}

// stack returns the latest version seen of a Stack.
func (t *tracker) stack(ns, name string) *pulumiv1.Stack {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.stacks[key(ns, name)]; st != nil {
		return st.last
	}
	return nil
}

// updatesOf returns copies of what was seen of the Updates of Stack ns/name.
func (t *tracker) updatesOf(ns, name string) []updateSeen {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []updateSeen
	for _, u := range t.updates {
		if u.stack == key(ns, name) {
			out = append(out, *u)
		}
	}
	return out
}

// waitStack blocks until f accepts the latest version of Stack ns/name, or the timeout.
func (t *tracker) waitStack(ctx context.Context, ns, name string, timeout time.Duration, f func(*pulumiv1.Stack) bool) (*pulumiv1.Stack, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, t.wake)
	defer stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		var last *pulumiv1.Stack
		if st := t.stacks[key(ns, name)]; st != nil {
			last = st.last
		}
		if last != nil && f(last) {
			return last, true
		}
		if ctx.Err() != nil {
			return last, false
		}
		t.cond.Wait()
	}
}

// wake makes every waiter re-check its condition.
func (t *tracker) wake() {
	t.mu.Lock()
	t.cond.Broadcast()
	t.mu.Unlock()
}

// phases counts the Updates seen in ns by phase.
func (t *tracker) phases(ns string) map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for k, u := range t.updates {
		if strings.HasPrefix(k, ns+"/") {
			p := string(u.phase)
			if p == "" {
				p = string(v1alpha1.UpdatePhasePending)
			}
			out[p]++
		}
	}
	return out
}

// updatesSince counts by phase the Updates of ns first seen at or after since.
func (t *tracker) updatesSince(ns string, since time.Time) (int, map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, out := 0, map[string]int{}
	for k, u := range t.updates {
		if strings.HasPrefix(k, ns+"/") && !u.seen.Before(since) {
			n++
			p := string(u.phase)
			if p == "" {
				p = string(v1alpha1.UpdatePhasePending)
			}
			out[p]++
		}
	}
	return n, out
}

// updatesIn returns copies of what was seen of the Updates of ns ("" for every namespace
// watched) first seen in [from, to). Deleted Updates stay: the manager prunes finished ones.
func (t *tracker) updatesIn(ns string, from, to time.Time) []updateSeen {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []updateSeen
	for k, u := range t.updates {
		if (ns == "" || strings.HasPrefix(k, ns+"/")) && !u.seen.Before(from) && u.seen.Before(to) {
			out = append(out, *u)
		}
	}
	return out
}
