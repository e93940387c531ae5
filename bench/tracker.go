package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// tracker is the one watch every scenario reads: it records when each state was first
// observed, so that times are measured at the moment the API server announces them (ms
// precision) rather than at the seconds granularity of the objects' own timestamps. It
// always watches Stacks and Updates; a scenario that needs StackRollouts or a template's
// instances adds them for its own span only, so that the other scenarios' API figures
// never carry those watches.
type tracker struct {
	mu      sync.Mutex
	cond    *sync.Cond
	cache   cache.Cache
	stacks  map[string]*stackSeen
	updates map[string]*updateSeen
	// instances: when each template instance was first seen Ready at its generation.
	instances map[string]time.Time
	rollouts  map[string]*rolloutSeen
}

type stackSeen struct {
	// ready maps the revision (status.lastUpdate.lastSuccessfulCommit) to the first time
	// the Stack was seen Ready on it.
	ready map[string]time.Time
	// last is the latest version seen.
	last *pulumiv1.Stack
}

type updateSeen struct {
	stack, revision string
	typ             v1alpha1.UpdateType
	// seen, run, done: when the watch first saw it, saw it Running (or finished, if it
	// never saw it Running) and saw it finished.
	seen, run, done  time.Time
	phase            v1alpha1.UpdatePhase
	reason, message  string
	created, started time.Time
	// ended is status.endTime, which like started has the API's one-second resolution.
	ended time.Time
}

// rolloutSeen is what was seen of one StackRollout.
type rolloutSeen struct {
	last *v1alpha1.StackRollout
	// at marks, by target revision, when the rollout was first seen Progressing toward it
	// (milestoneProgressing), each wave first seen as the current one (waveOpened(i)) and
	// the rollout first seen Idle with it stable (milestoneIdle).
	at Milestones
}

const (
	milestoneProgressing = "progressing"
	milestoneIdle        = "idle"
)

func waveOpened(i int) string { return fmt.Sprintf("wave %d opened", i) }

func key(ns, name string) string { return ns + "/" + name }

// entry returns m's entry for k, first storing there what create makes when m has none:
// what is seen of an object the first time starts its record.
func entry[V any](m map[string]V, k string, create func() V) V {
	v, ok := m[k]
	if !ok {
		v = create()
		m[k] = v
	}
	return v
}

// keysOf returns the tracker's keys of the named objects of ns.
func keysOf(ns string, names []string) []string {
	keys := make([]string, len(names))
	for i, name := range names {
		keys[i] = key(ns, name)
	}
	return keys
}

// startTracker watches the given namespaces until ctx is done.
func startTracker(ctx context.Context, cfg *rest.Config, s *runtime.Scheme, namespaces ...string) (*tracker, error) {
	t := &tracker{stacks: map[string]*stackSeen{}, updates: map[string]*updateSeen{},
		instances: map[string]time.Time{}, rollouts: map[string]*rolloutSeen{}}
	t.cond = sync.NewCond(&t.mu)
	nss := map[string]cache.Config{}
	for _, ns := range namespaces {
		nss[ns] = cache.Config{}
	}
	c, err := cache.New(cfg, cache.Options{Scheme: s, DefaultNamespaces: nss})
	if err != nil {
		return nil, fmt.Errorf("failed to create cache: %w", err)
	}
	t.cache = c
	go func() { _ = c.Start(ctx) }()
	context.AfterFunc(ctx, t.wake)
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("failed to sync watch cache: %w", ctx.Err())
	}
	if err := t.watch(ctx, &pulumiv1.Stack{}, t.onStack); err != nil {
		return nil, err
	}
	if err := t.watch(ctx, &v1alpha1.Update{}, t.onUpdate); err != nil {
		return nil, err
	}
	return t, nil
}

// watch adds obj's kind to the watch and returns once it is synced; on is called with the
// tracker locked for every object added or changed, with when the watch delivered it.
func (t *tracker) watch(ctx context.Context, obj client.Object, on func(obj any, now time.Time)) error {
	inf, err := t.cache.GetInformer(ctx, obj)
	if err != nil {
		return fmt.Errorf("failed to watch %T: %w", obj, err)
	}
	handle := func(o any) {
		now := time.Now()
		t.mu.Lock()
		defer t.mu.Unlock()
		on(o, now)
		t.cond.Broadcast()
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, o any) { handle(o) },
	}); err != nil {
		return fmt.Errorf("failed to watch %T: %w", obj, err)
	}
	return nil
}

// watchRollouts adds StackRollouts to the watch; stop removes them.
func (t *tracker) watchRollouts(ctx context.Context) (stop func(), err error) {
	obj := &v1alpha1.StackRollout{}
	if err := t.watch(ctx, obj, t.onRollout); err != nil {
		return nil, err
	}
	return func() { _ = t.cache.RemoveInformer(ctx, obj) }, nil
}

// watchInstances adds the instances of a template's kind to the watch (they exist only
// once the template is served, and are unstructured); stop removes them.
func (t *tracker) watchInstances(ctx context.Context, gvk schema.GroupVersionKind) (stop func(), err error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := t.watch(ctx, obj, t.onInstance); err != nil {
		return nil, err
	}
	return func() { _ = t.cache.RemoveInformer(ctx, obj) }, nil
}

// isReady is kstatus Ready for the Stack's current generation.
func isReady(s *pulumiv1.Stack) bool {
	c := apimeta.FindStatusCondition(s.Status.Conditions, pulumiv1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == pulumiv1.ReasonProcessingCompleted &&
		c.ObservedGeneration == s.Generation && s.Status.ObservedGeneration == s.Generation
}

func (t *tracker) onStack(obj any, now time.Time) {
	s, ok := obj.(*pulumiv1.Stack)
	if !ok {
		return
	}
	st := entry(t.stacks, key(s.Namespace, s.Name), func() *stackSeen { return &stackSeen{ready: map[string]time.Time{}} })
	st.last = s
	if !isReady(s) {
		return
	}
	rev := ""
	if s.Status.LastUpdate != nil {
		rev = s.Status.LastUpdate.LastSuccessfulCommit
	}
	for _, r := range []string{rev, ""} {
		if _, ok := st.ready[r]; !ok {
			st.ready[r] = now
		}
	}
}

func (t *tracker) onUpdate(obj any, now time.Time) {
	u, ok := obj.(*v1alpha1.Update)
	if !ok {
		return
	}
	us := entry(t.updates, key(u.Namespace, u.Name), func() *updateSeen {
		return &updateSeen{stack: key(u.Namespace, u.Spec.StackName), revision: u.Spec.Revision, typ: u.Spec.Type,
			seen: now, created: u.CreationTimestamp.Time}
	})
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
}

func (t *tracker) onRollout(obj any, now time.Time) {
	ro, ok := obj.(*v1alpha1.StackRollout)
	if !ok {
		return
	}
	rs := entry(t.rollouts, key(ro.Namespace, ro.Name), func() *rolloutSeen { return &rolloutSeen{at: Milestones{}} })
	rs.last = ro
	st := &ro.Status
	if st.Target != nil {
		rev := st.Target.Revision
		if st.Phase == v1alpha1.RolloutProgressing {
			rs.at.Mark(rev, milestoneProgressing, now)
		}
		for i := 0; i <= int(st.Wave) && i < len(st.Waves); i++ {
			rs.at.Mark(rev, waveOpened(i), now)
		}
	}
	if st.Stable != nil && st.Phase == v1alpha1.RolloutIdle {
		rs.at.Mark(st.Stable.Revision, milestoneIdle, now)
	}
}

func (t *tracker) onInstance(obj any, now time.Time) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || !instanceReady(u) {
		return
	}
	k := key(u.GetNamespace(), u.GetName())
	if _, seen := t.instances[k]; !seen {
		t.instances[k] = now
	}
}

// instanceReady is the instance's Ready condition True for its current generation.
func instanceReady(u *unstructured.Unstructured) bool {
	m, ok := u.Object["status"].(map[string]any)
	if !ok {
		return false
	}
	var st v1alpha1.InstanceStatus
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st); err != nil {
		return false
	}
	c := apimeta.FindStatusCondition(st.Conditions, pulumiv1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == u.GetGeneration()
}

// readyAt returns when the Stack was first seen Ready on rev ("" for any revision).
func (t *tracker) readyAt(ns, name, rev string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.stacks[key(ns, name)]; st != nil {
		return st.readyAtRev(rev)
	}
	return time.Time{}, false
}

// readyOn reports whether the Stack was seen Ready on a revision containing rev (any
// revision when rev is ""), whatever the revision's spelling ("<sha>", "main@sha1:<sha>").
func (st *stackSeen) readyOn(rev string) bool {
	_, ok := st.readyAtRev(rev)
	return ok
}

func (st *stackSeen) readyAtRev(rev string) (time.Time, bool) {
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

// instanceReadyAt returns when the instance (its key) was first seen Ready.
func (t *tracker) instanceReadyAt(k string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.instances[k]
	return at, ok
}

// rollout returns the latest version seen of StackRollout ns/name, and when it reached
// milestone for rev (zero: not seen).
func (t *tracker) rollout(ns, name, rev, milestone string) (*v1alpha1.StackRollout, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := t.rollouts[key(ns, name)]
	if rs == nil {
		return nil, time.Time{}
	}
	return rs.last, rs.at[rev][milestone]
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
	return t.waitKeys(ctx, keysOf(ns, names), timeout, interval, progress, ok)
}

// waitKeys is waitStacks for Stacks of any namespaces, named by key(namespace, name).
func (t *tracker) waitKeys(ctx context.Context, keys []string, timeout time.Duration,
	interval time.Duration, progress func(n int), ok func(*stackSeen) bool,
) int {
	return t.waitCount(ctx, len(keys), timeout, interval, progress, func() int {
		n := 0
		for _, k := range keys {
			if st := t.stacks[k]; st != nil && ok(st) {
				n++
			}
		}
		return n
	})
}

// waitInstances blocks until every instance named by key(namespace, name) has been seen
// Ready, ctx ends or timeout passes, as waitKeys does for Stacks.
func (t *tracker) waitInstances(ctx context.Context, keys []string, timeout, interval time.Duration, progress func(int)) int {
	return t.waitCount(ctx, len(keys), timeout, interval, progress, func() int {
		n := 0
		for _, k := range keys {
			if _, ok := t.instances[k]; ok {
				n++
			}
		}
		return n
	})
}

// waitCount blocks until count, called with the tracker locked, reaches want, ctx ends or
// timeout passes; progress, if not nil, is called every interval with the count. It
// returns the last count.
func (t *tracker) waitCount(ctx context.Context, want int, timeout, interval time.Duration, progress func(int), count func() int) int {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, t.wake)
	defer stop()
	if progress != nil {
		go func() {
			tk := time.NewTicker(interval)
			defer tk.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tk.C:
					t.mu.Lock()
					n := count()
					t.mu.Unlock()
					progress(n)
				}
			}
		}()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		n := count()
		if n >= want || ctx.Err() != nil {
			return n
		}
		t.cond.Wait()
	}
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
	var last *pulumiv1.Stack
	n := t.waitCount(ctx, 1, timeout, 0, nil, func() int {
		last = nil
		if st := t.stacks[key(ns, name)]; st != nil {
			last = st.last
		}
		if last != nil && f(last) {
			return 1
		}
		return 0
	})
	return last, n == 1
}

// wake makes every waiter re-check its condition.
func (t *tracker) wake() {
	t.mu.Lock()
	t.cond.Broadcast()
	t.mu.Unlock()
}

// phases counts the Updates seen in ns by phase.
func (t *tracker) phases(ns string) map[string]int {
	_, out := t.updatesSince(ns, time.Time{})
	return out
}

// updatesSince counts by phase the Updates of ns first seen at or after since.
func (t *tracker) updatesSince(ns string, since time.Time) (int, map[string]int) {
	out := map[string]int{}
	ups := t.updatesIn(ns, since, time.Now().Add(time.Hour))
	for _, u := range ups {
		out[phaseName(u.phase)]++
	}
	return len(ups), out
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

// phaseName is an Update's phase, Pending before the manager has set one.
func phaseName(p v1alpha1.UpdatePhase) string {
	if p == "" {
		return string(v1alpha1.UpdatePhasePending)
	}
	return string(p)
}
