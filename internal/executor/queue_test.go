package executor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// item parses "namespace/name", optionally followed by "@group" and then ">tenant".
func item(s string) Item[string] {
	rest, tenant, _ := strings.Cut(s, ">")
	key, group, _ := strings.Cut(rest, "@")
	ns, name, _ := strings.Cut(key, "/")
	return Item[string]{Key: types.NamespacedName{Namespace: ns, Name: name}, Group: group, Tenant: tenant, Value: s}
}

func keyOf(s string) types.NamespacedName { return item(s).Key }

// drive starts whatever may start, then releases the item running longest, until nothing
// is left. It returns what happened: "ns/name" for a start, "-ns/name" for a release.
func drive(q *Queue[string]) []string {
	var events, running []string
	for {
		for {
			it, ok := q.TryNext()
			if !ok {
				break
			}
			events = append(events, it.Key.String())
			running = append(running, it.Key.String())
		}
		if len(running) == 0 {
			return events
		}
		events = append(events, "-"+running[0])
		q.Release(keyOf(running[0]))
		running = running[1:]
	}
}

func TestQueue_Next_ServesNamespacesInTurnWithinLimits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limits  Limits
		adopted []string
		pushed  []string
		want    []string
	}{
		{
			name:   "round robin: a namespace with a backlog and one with a single item alternate",
			limits: Limits{Max: 1},
			pushed: []string{"a/1", "a/2", "a/3", "a/4", "b/1"},
			want:   []string{"a/1", "-a/1", "b/1", "-b/1", "a/2", "-a/2", "a/3", "-a/3", "a/4", "-a/4"},
		},
		{
			name:   "round robin: three namespaces take turns, each in its own submission order",
			limits: Limits{Max: 1},
			pushed: []string{"a/1", "a/2", "b/1", "b/2", "c/1"},
			want:   []string{"a/1", "-a/1", "b/1", "-b/1", "c/1", "-c/1", "a/2", "-a/2", "b/2", "-b/2"},
		},
		{
			name:   "per-namespace limit: a namespace at its limit waits while another gets the free slot",
			limits: Limits{Max: 2, PerNamespace: 1},
			pushed: []string{"a/1", "a/2", "a/3", "b/1"},
			want:   []string{"a/1", "b/1", "-a/1", "a/2", "-b/1", "-a/2", "a/3", "-a/3"},
		},
		{
			name:   "per-namespace limit: a lone namespace never uses more than its share",
			limits: Limits{Max: 3, PerNamespace: 1},
			pushed: []string{"a/1", "a/2"},
			want:   []string{"a/1", "-a/1", "a/2", "-a/2"},
		},
		{
			name:   "per-namespace limit of 0 leaves only the global one",
			limits: Limits{Max: 2},
			pushed: []string{"a/1", "a/2", "a/3"},
			want:   []string{"a/1", "a/2", "-a/1", "a/3", "-a/2", "-a/3"},
		},
		{
			name:   "global limit: no more run at once than Max, across namespaces",
			limits: Limits{Max: 2, PerNamespace: 2},
			pushed: []string{"a/1", "b/1", "c/1"},
			want:   []string{"a/1", "b/1", "-a/1", "c/1", "-b/1", "-c/1"},
		},
		{
			name:   "global limit below 1 counts as 1",
			limits: Limits{Max: 0},
			pushed: []string{"a/1", "b/1"},
			want:   []string{"a/1", "-a/1", "b/1", "-b/1"},
		},
		{
			name:    "adopted items hold their slots until released",
			limits:  Limits{Max: 2, PerNamespace: 1},
			adopted: []string{"a/0"},
			pushed:  []string{"a/1", "b/1"},
			want:    []string{"b/1", "-b/1"},
		},
		{
			name:   "tenant: runs in one platform namespace count against their tenants, not against it",
			limits: Limits{Max: 2, PerNamespace: 1},
			pushed: []string{"p/1>a", "p/2>a", "p/3>b"},
			want:   []string{"p/1", "p/3", "-p/1", "p/2", "-p/3", "-p/2"},
		},
		{
			name:   "tenant: an instance's run shares its tenant's limit with the tenant's own Stacks",
			limits: Limits{Max: 2, PerNamespace: 1},
			pushed: []string{"a/1", "p/1>a", "b/1"},
			want:   []string{"a/1", "b/1", "-a/1", "p/1", "-b/1", "-p/1"},
		},
		{
			name:    "tenant: an adopted run holds its tenant's slot",
			limits:  Limits{Max: 2, PerNamespace: 1},
			adopted: []string{"p/0>a"},
			pushed:  []string{"a/1", "b/1"},
			want:    []string{"b/1", "-b/1"},
		},
		{
			name:   "group: an item whose group runs waits, and the next of its namespace goes first",
			limits: Limits{Max: 2},
			pushed: []string{"a/1@s", "a/2@s", "a/3@t"},
			want:   []string{"a/1", "a/3", "-a/1", "a/2", "-a/3", "-a/2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQueue[string](tc.limits)
			for _, s := range tc.adopted {
				q.Adopt(item(s))
			}
			for _, s := range tc.pushed {
				q.Push(item(s))
			}
			if diff := cmp.Diff(tc.want, drive(q)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueue_Push_DeduplicatesQueuedAndRunningKeys(t *testing.T) {
	for _, tc := range []struct {
		name       string
		setup      func(q *Queue[string])
		wantPushed bool
		wantQueued int
		wantRun    int
	}{
		{
			name:       "a new key is queued",
			setup:      func(*Queue[string]) {},
			wantPushed: true, wantQueued: 1,
		},
		{
			name:       "a key already queued is not queued twice",
			setup:      func(q *Queue[string]) { q.Push(item("a/1")) },
			wantPushed: false, wantQueued: 1,
		},
		{
			name: "a key running is not queued: it would run twice",
			setup: func(q *Queue[string]) {
				q.Push(item("a/1"))
				q.TryNext()
			},
			wantPushed: false, wantRun: 1,
		},
		{
			name:       "a key adopted as running is not queued",
			setup:      func(q *Queue[string]) { q.Adopt(item("a/1")) },
			wantPushed: false, wantRun: 1,
		},
		{
			name: "a key released is queued again: the Update may be retried",
			setup: func(q *Queue[string]) {
				q.Push(item("a/1"))
				q.TryNext()
				q.Release(keyOf("a/1"))
			},
			wantPushed: true, wantQueued: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQueue[string](Limits{Max: 1})
			tc.setup(q)
			got := q.Push(item("a/1"))
			queued, running := q.Pending()
			if diff := cmp.Diff([]int{btoi(tc.wantPushed), tc.wantQueued, tc.wantRun}, []int{btoi(got), queued, running}); diff != "" {
				t.Errorf("pushed, queued, running (-want +got):\n%s", diff)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestQueue_Adopt_DropsTheQueuedCopy(t *testing.T) {
	q := NewQueue[string](Limits{Max: 2})
	q.Push(item("a/1"))
	q.Push(item("a/2"))
	q.Adopt(item("a/1"))
	queued, running := q.Pending()
	if diff := cmp.Diff([]int{1, 1}, []int{queued, running}); diff != "" {
		t.Errorf("queued, running (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a/2", "-a/2"}, drive(q)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !q.Release(keyOf("a/1")) {
		t.Error("Release() found the adopted a/1 not running")
	}
}

func TestQueue_Release_WakesAWaitingNext(t *testing.T) {
	q := NewQueue[string](Limits{Max: 1})
	q.Push(item("a/1"))
	q.Push(item("b/1"))
	if _, ok := q.TryNext(); !ok {
		t.Fatal("TryNext() found nothing to run in an idle queue")
	}
	got := make(chan string, 1)
	go func() {
		it, _ := q.Next(t.Context())
		got <- it.Key.String()
	}()
	select {
	case s := <-got:
		t.Fatalf("Next() = %s while the only slot is taken", s)
	case <-time.After(50 * time.Millisecond):
	}
	if !q.Release(keyOf("a/1")) {
		t.Fatal("Release() found a/1 not running")
	}
	select {
	case s := <-got:
		if s != "b/1" {
			t.Errorf("Next() = %s, want b/1", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next() still waiting after a slot was released")
	}
}

// In a synctest bubble, synctest.Wait returns once Next is blocked waiting, so the
// wake-up is what the test sees, not an item that was there before Next looked.
func TestQueue_Push_WakesAWaitingNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue[string](Limits{Max: 1})
		got := make(chan string, 1)
		go func() {
			it, _ := q.Next(t.Context())
			got <- it.Key.String()
		}()
		synctest.Wait()
		q.Push(item("a/1"))
		if s := <-got; s != "a/1" {
			t.Errorf("Next() = %s, want a/1", s)
		}
	})
}

func TestQueue_Next_ReturnsOnceTheContextIsDone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pushed []string
	}{
		{name: "waiting on an empty queue"},
		{name: "waiting for a slot held by another", pushed: []string{"a/1", "a/2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQueue[string](Limits{Max: 1})
			for _, s := range tc.pushed {
				q.Push(item(s))
			}
			q.TryNext()
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan bool, 1)
			go func() {
				_, ok := q.Next(ctx)
				done <- ok
			}()
			cancel()
			select {
			case ok := <-done:
				if ok {
					t.Error("Next() returned an item after its context was done")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Next() still waiting after its context was done")
			}
		})
	}
}

func TestQueue_Next_DoneContextTakesNothing(t *testing.T) {
	q := NewQueue[string](Limits{Max: 1})
	q.Push(item("a/1"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if it, ok := q.Next(ctx); ok {
		t.Errorf("Next() = %v after its context was done; a stopping executor must start nothing", it.Key)
	}
	if queued, _ := q.Pending(); queued != 1 {
		t.Errorf("queued = %d, want 1", queued)
	}
}

func TestQueue_SetLimits_RaisedLimitWakesAWaitingNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue[string](Limits{Max: 2, PerNamespace: 1})
		q.Push(item("a/1"))
		q.Push(item("a/2"))
		q.TryNext()
		got := make(chan string, 1)
		go func() {
			it, _ := q.Next(t.Context())
			got <- it.Key.String()
		}()
		synctest.Wait()
		select {
		case s := <-got:
			t.Fatalf("Next() = %s while the namespace's only slot was taken", s)
		default:
		}
		q.SetLimits(Limits{Max: 2})
		if s := <-got; s != "a/2" {
			t.Errorf("Next() = %s, want a/2", s)
		}
	})
}

// Workers racing for slots never exceed the limits, and every item runs once.
func TestQueue_Next_ConcurrentWorkersStayWithinLimits(t *testing.T) {
	const namespaces, perNamespace, workers = 4, 25, 8
	q := NewQueue[string](Limits{Max: 3, PerNamespace: 2})
	var mu sync.Mutex
	running, ran := map[string]int{}, map[string]int{}
	total, maxTotal := 0, 0
	var violations []string
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				it, ok := q.Next(ctx)
				if !ok {
					return
				}
				ns := it.Key.Namespace
				mu.Lock()
				running[ns]++
				total++
				ran[it.Key.String()]++
				maxTotal = max(maxTotal, total)
				if running[ns] > 2 {
					violations = append(violations, fmt.Sprintf("%d running in %s", running[ns], ns))
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				running[ns]--
				total--
				mu.Unlock()
				q.Release(it.Key)
			}
		})
	}
	for i := range perNamespace {
		for n := range namespaces {
			q.Push(item(fmt.Sprintf("ns%d/u%d", n, i)))
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		queued, inFlight := q.Pending()
		if queued == 0 && inFlight == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue not drained: %d queued, %d running", queued, inFlight)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if maxTotal > 3 {
		t.Errorf("%d ran at once, want at most 3", maxTotal)
	}
	if len(violations) > 0 {
		t.Errorf("per-namespace limit exceeded: %v", violations)
	}
	if len(ran) != namespaces*perNamespace {
		t.Errorf("%d items ran, want %d", len(ran), namespaces*perNamespace)
	}
	for k, n := range ran {
		if n != 1 {
			t.Errorf("%s ran %d times, want once", k, n)
		}
	}
}

func TestQueue_Running_ListsRunningKeysSorted(t *testing.T) {
	q := NewQueue[string](Limits{Max: 3})
	for _, s := range []string{"b/1", "a/2", "a/1", "c/1"} {
		q.Push(item(s))
	}
	for range 3 {
		q.TryNext()
	}
	want := []types.NamespacedName{keyOf("a/2"), keyOf("b/1"), keyOf("c/1")}
	if diff := cmp.Diff(want, q.Running()); diff != "" {
		t.Errorf("Running() (-want +got):\n%s", diff)
	}
}

// Position's Ahead is exact while every tenant keeps taking its turn: with one slot, each
// queued item has as many items ahead as start before it.
func TestQueue_Position_AheadMatchesTheOrderOfService(t *testing.T) {
	tests := []struct {
		name   string
		limits Limits
		items  []string
	}{
		{name: "OneTenant", limits: Limits{Max: 1}, items: []string{"a/1", "a/2", "a/3"}},
		{name: "TenantsTakeTurns", limits: Limits{Max: 1}, items: []string{"a/1", "a/2", "a/3", "a/4", "b/1", "c/1", "c/2", "b/2"}},
		{name: "TenantLabelSharesATurn", limits: Limits{Max: 1}, items: []string{"a/1>t", "b/1>t", "c/1", "a/2>t", "c/2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewQueue[string](tt.limits)
			for _, s := range tt.items {
				q.Push(item(s))
			}
			want := map[string]int{}
			for _, s := range tt.items {
				p, ok := q.Position(keyOf(s))
				if !ok {
					t.Fatalf("Position(%s): not queued", s)
				}
				want[keyOf(s).String()] = p.Ahead
			}
			got := map[string]int{}
			for i, e := range drive(q) {
				if !strings.HasPrefix(e, "-") {
					got[e] = i / 2
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Ahead (-position +order of service):\n%s", diff)
			}
			if _, ok := q.Position(keyOf(tt.items[0])); ok {
				t.Error("an item that ran is still positioned")
			}
		})
	}
}

// The estimate counts waves of mean runs: the queue's slots, and the tenant's own limit.
func TestQueue_Position_EstimatedWaitFromTheMeanRun(t *testing.T) {
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	q := NewQueue[string](Limits{Max: 2, PerNamespace: 1})
	q.now = func() time.Time { return now }
	for _, s := range []string{"a/1", "b/1", "a/2", "a/3", "c/1"} {
		q.Push(item(s))
	}
	if p, _ := q.Position(keyOf("c/1")); p.EstimatedWait != 0 {
		t.Errorf("estimate before any run finished = %v; want none", p.EstimatedWait)
	}
	first, _ := q.TryNext() // a/1
	second, _ := q.TryNext()
	now = now.Add(4 * time.Minute)
	q.Release(first.Key)
	q.Release(second.Key)
	// c/1 has its turn, then a/2: both run, and a/3 waits for a slot and for a/2.
	for _, want := range []string{"c/1", "a/2"} {
		if it, _ := q.TryNext(); it.Key.String() != want {
			t.Fatalf("started %s; want %s", it.Key, want)
		}
	}
	tests := []struct {
		key          string
		wantAhead    int
		wantWait     time.Duration
		wantAtLimit  bool
		wantRunning  int
		wantSlots    int
		wantPosition bool
	}{
		{key: "a/3", wantAhead: 0, wantWait: 4 * time.Minute, wantAtLimit: true, wantRunning: 2, wantSlots: 2, wantPosition: true},
		{key: "a/2"},
	}
	for _, tt := range tests {
		p, ok := q.Position(keyOf(tt.key))
		if ok != tt.wantPosition {
			t.Fatalf("Position(%s) queued = %v; want %v", tt.key, ok, tt.wantPosition)
		}
		if diff := cmp.Diff(Position{Ahead: tt.wantAhead, EstimatedWait: tt.wantWait, TenantAtLimit: tt.wantAtLimit, Running: tt.wantRunning, Slots: tt.wantSlots}, p); ok && diff != "" {
			t.Errorf("Position(%s) (-want +got):\n%s", tt.key, diff)
		}
	}
}
