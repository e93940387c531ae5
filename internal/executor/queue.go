package executor

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Limits bound what a Queue lets run at once.
type Limits struct {
	// Max bounds the items running at once; less than 1 counts as 1.
	Max int
	// PerNamespace bounds the items of one namespace running at once, so that one tenant
	// cannot take every slot; 0 means Max.
	PerNamespace int
}

func (l Limits) normalized() Limits {
	l.Max = max(l.Max, 1)
	if l.PerNamespace <= 0 || l.PerNamespace > l.Max {
		l.PerNamespace = l.Max
	}
	return l
}

// Item is an entry of a Queue.
type Item[T any] struct {
	// Key names the Update.
	Key types.NamespacedName
	// Tenant is the namespace the item is counted against; empty means Key's. The Stack
	// of a template's instance lives in the platform namespace, yet its runs are the
	// instance's tenant's.
	Tenant string
	// Group names items that never run at the same time (the local executor's Stack);
	// empty means none.
	Group string
	// Value is the executor's own data about the item.
	Value T
}

// Queue decides which queued Update runs next, shared by the executors. Namespaces are
// tenants, and hostile ones: a tenant with a hundred Updates queued must not delay one
// with a single Update by more than one turn, so each namespace has a FIFO of its own and
// the namespaces take turns. A namespace at its PerNamespace limit, or whose queued items
// all wait for a busy Group, is passed over without losing its place. An item is
// deduplicated while queued or running: the Update controller submits every Pending
// Update on each reconcile. The zero value is not usable; NewQueue makes one. A Queue is
// safe for concurrent use.
type Queue[T any] struct {
	mu     sync.Mutex
	limits Limits
	// wake is closed, and replaced, whenever a slot may have become available: closing a
	// channel wakes every waiter and, unlike sync.Cond, lets them also wait on a context.
	wake chan struct{}
	// fifo holds each namespace's queued items in submission order.
	fifo map[string][]Item[T]
	// turns lists the namespaces with queued items, the one served longest ago first.
	turns []string
	// queued holds the tenant of each queued item.
	queued  map[types.NamespacedName]string
	running map[types.NamespacedName]Item[T]
	perNS   map[string]int
	busy    map[string]bool
	// started is when each running item took its slot, and meanRun the moving average of
	// how long finished items held theirs (for Position's estimate).
	started map[types.NamespacedName]time.Time
	meanRun time.Duration
	now     func() time.Time
}

// NewQueue returns an empty queue with the given limits.
func NewQueue[T any](l Limits) *Queue[T] {
	return &Queue[T]{
		limits: l.normalized(), wake: make(chan struct{}),
		fifo: map[string][]Item[T]{}, queued: map[types.NamespacedName]string{},
		running: map[types.NamespacedName]Item[T]{}, perNS: map[string]int{}, busy: map[string]bool{},
		started: map[types.NamespacedName]time.Time{}, now: time.Now,
	}
}

// SetLimits changes the limits. Items already running are never stopped: a lower limit
// only holds back new ones until enough have been released.
func (q *Queue[T]) SetLimits(l Limits) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.limits = l.normalized()
	q.broadcast()
}

// Push queues it at the end of its namespace's FIFO. It reports false, and changes
// nothing, when an item with its key is already queued or running.
func (q *Queue[T]) Push(it Item[T]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.queued[it.Key]; ok {
		return false
	}
	if _, ok := q.running[it.Key]; ok {
		return false
	}
	ns := it.tenant()
	if len(q.fifo[ns]) == 0 {
		q.turns = append(q.turns, ns)
	}
	q.fifo[ns] = append(q.fifo[ns], it)
	q.queued[it.Key] = ns
	q.broadcast()
	return true
}

// Adopt counts it as running, whatever the limits: it was started before this queue
// existed (by a manager that restarted) and holds its slot until released. A queued item
// with its key is dropped, since it is already running.
func (q *Queue[T]) Adopt(it Item[T]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.running[it.Key]; ok {
		return
	}
	if _, ok := q.queued[it.Key]; ok {
		q.dropQueued(it.Key)
	}
	q.markRunning(it)
}

// Next blocks until a queued item may run, reserves its slot and returns it. It returns
// false once ctx is done. The caller releases the item when it ends.
func (q *Queue[T]) Next(ctx context.Context) (Item[T], bool) {
	for {
		if ctx.Err() != nil {
			return Item[T]{}, false
		}
		q.mu.Lock()
		it, ok := q.take()
		wake := q.wake
		q.mu.Unlock()
		if ok {
			return it, true
		}
		select {
		case <-ctx.Done():
			return Item[T]{}, false
		case <-wake:
		}
	}
}

// TryNext is Next without waiting: it reports false when nothing may run now.
func (q *Queue[T]) TryNext() (Item[T], bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.take()
}

// Release frees the slot of the running item with key, and reports whether there was one.
func (q *Queue[T]) Release(key types.NamespacedName) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	it, ok := q.running[key]
	if !ok {
		return false
	}
	delete(q.running, key)
	if start, ok := q.started[key]; ok {
		delete(q.started, key)
		// An exponential moving average: recent runs count most, one outlier little.
		if d := q.now().Sub(start); q.meanRun == 0 {
			q.meanRun = d
		} else {
			q.meanRun = (4*q.meanRun + d) / 5
		}
	}
	if ns := it.tenant(); q.perNS[ns] <= 1 {
		delete(q.perNS, ns)
	} else {
		q.perNS[ns]--
	}
	if it.Group != "" {
		delete(q.busy, it.Group)
	}
	q.broadcast()
	return true
}

// Pending reports how many items are queued and running.
func (q *Queue[T]) Pending() (queued, running int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued), len(q.running)
}

// Running returns the keys of the running items, sorted.
func (q *Queue[T]) Running() []types.NamespacedName {
	q.mu.Lock()
	defer q.mu.Unlock()
	keys := make([]types.NamespacedName, 0, len(q.running))
	for k := range q.running {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return keys
}

// take reserves the first item that may run: the namespaces are tried in turn, the one
// served longest ago first, and the one served goes to the back of the line.
func (q *Queue[T]) take() (Item[T], bool) {
	if len(q.running) >= q.limits.Max {
		return Item[T]{}, false
	}
	for i, ns := range q.turns {
		if q.perNS[ns] >= q.limits.PerNamespace {
			continue
		}
		items := q.fifo[ns]
		j := slices.IndexFunc(items, func(it Item[T]) bool { return it.Group == "" || !q.busy[it.Group] })
		if j < 0 {
			continue
		}
		it := items[j]
		q.fifo[ns] = slices.Delete(items, j, j+1)
		q.turns = slices.Delete(q.turns, i, i+1)
		if len(q.fifo[ns]) > 0 {
			q.turns = append(q.turns, ns)
		} else {
			delete(q.fifo, ns)
		}
		delete(q.queued, it.Key)
		q.markRunning(it)
		return it, true
	}
	return Item[T]{}, false
}

func (it Item[T]) tenant() string {
	if it.Tenant != "" {
		return it.Tenant
	}
	return it.Key.Namespace
}

func (q *Queue[T]) markRunning(it Item[T]) {
	q.running[it.Key] = it
	q.started[it.Key] = q.now()
	q.perNS[it.tenant()]++
	if it.Group != "" {
		q.busy[it.Group] = true
	}
}

// dropQueued removes the queued item with key; its tenant keeps its turn if it has more
// queued.
func (q *Queue[T]) dropQueued(key types.NamespacedName) {
	ns := q.queued[key]
	items := slices.DeleteFunc(q.fifo[ns], func(it Item[T]) bool { return it.Key == key })
	delete(q.queued, key)
	if len(items) > 0 {
		q.fifo[ns] = items
		return
	}
	delete(q.fifo, ns)
	q.turns = slices.DeleteFunc(q.turns, func(n string) bool { return n == ns })
}

// Position is where a queued item stands.
type Position struct {
	// Ahead is how many queued items are expected to start before it: its tenant's
	// earlier ones, and from each other tenant as many as get a turn first.
	Ahead int
	// TenantAtLimit is set when its tenant already runs as many items as a tenant may.
	TenantAtLimit bool
	// Running and Slots are the items running and the queue's Max.
	Running, Slots int
	// EstimatedWait is a rough guess from the mean run so far (0 before any run finished).
	EstimatedWait time.Duration
}

// Position reports where the queued item with key stands; false when it is not queued
// (running, or unknown). The estimate assumes the tenants keep taking turns and runs last
// as long as the recent ones did; groups (the local executor's one run per Stack) are not
// counted.
func (q *Queue[T]) Position(key types.NamespacedName) (Position, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ns, ok := q.queued[key]
	if !ok {
		return Position{}, false
	}
	own := slices.IndexFunc(q.fifo[ns], func(it Item[T]) bool { return it.Key == key })
	turn := slices.Index(q.turns, ns)
	ahead := own
	for i, other := range q.turns {
		if other == ns {
			continue
		}
		turns := own
		if i < turn {
			turns++
		}
		ahead += min(len(q.fifo[other]), turns)
	}
	p := Position{Ahead: ahead, TenantAtLimit: q.perNS[ns] >= q.limits.PerNamespace, Running: len(q.running), Slots: q.limits.Max}
	if q.meanRun > 0 {
		// Items start as slots free up, a wave per mean run: the queue's, and the
		// tenant's own (its earlier items also run at most PerNamespace at a time).
		waves := max(waves(ahead, q.limits.Max-len(q.running), q.limits.Max), waves(own, q.limits.PerNamespace-q.perNS[ns], q.limits.PerNamespace))
		p.EstimatedWait = time.Duration(waves) * q.meanRun
	}
	return p, true
}

// waves is how many rounds of runs end before the item with ahead items before it starts,
// free slots being free now and every round freeing size.
func waves(ahead, free, size int) int {
	if ahead < free {
		return 0
	}
	return (ahead-max(free, 0))/size + 1
}

func (q *Queue[T]) broadcast() {
	close(q.wake)
	q.wake = make(chan struct{})
}
