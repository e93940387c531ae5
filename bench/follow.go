package bench

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Follow watches the objects of list's kind in namespace until ctx ends, and calls seen
// with each one added or changed and the time the watch delivered it; a watch that breaks
// is started again from the last resource version seen. Milestones taken this way all
// come through the same API server, so their differences are precise to milliseconds,
// where objects' own timestamps have whole seconds.
func Follow(ctx context.Context, c client.WithWatch, namespace string, list client.ObjectList, seen func(client.Object, time.Time)) {
	rv := ""
	for ctx.Err() == nil {
		opts := []client.ListOption{client.InNamespace(namespace)}
		if rv != "" {
			opts = append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		}
		w, err := c.Watch(ctx, list, opts...)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = ""
				break
			}
			obj, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			rv = obj.GetResourceVersion()
			if ev.Type != watch.Deleted {
				seen(obj, time.Now())
			}
		}
		w.Stop()
	}
}

// Milestones are when a watch first saw each milestone of each run (a Stack's, an
// Update's), keyed by the run.
type Milestones map[string]map[string]time.Time

// Mark records that run reached milestone at, unless it was seen before.
func (m Milestones) Mark(run, milestone string, at time.Time) {
	seen := entry(m, run, func() map[string]time.Time { return map[string]time.Time{} })
	if _, ok := seen[milestone]; !ok {
		seen[milestone] = at
	}
}

// Spans returns, for each phase (a pair of milestones), its durations over the given runs
// that have both.
func (m Milestones) Spans(runs []string, phases [][2]string) map[[2]string][]time.Duration {
	out := map[[2]string][]time.Duration{}
	for _, r := range runs {
		seen := m[r]
		for _, p := range phases {
			from, ok1 := seen[p[0]]
			to, ok2 := seen[p[1]]
			if ok1 && ok2 {
				out[p] = append(out[p], to.Sub(from))
			}
		}
	}
	return out
}

// Timeline is Milestones that watches fill concurrently: FollowAll the kinds into an
// observer that Marks them, then read the spans.
type Timeline struct {
	mu   sync.Mutex
	seen Milestones
}

// NewTimeline returns an empty timeline.
func NewTimeline() *Timeline { return &Timeline{seen: Milestones{}} }

// Mark records that run reached milestone at, unless it was seen before. An object that
// names no run (one without the label that says whose it is) has run "" and is ignored.
func (t *Timeline) Mark(run, milestone string, at time.Time) {
	if run == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen.Mark(run, milestone, at)
}

// At returns when run was first seen reaching milestone.
func (t *Timeline) At(run, milestone string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.seen[run][milestone]
	return at, ok
}

// Spans is Milestones.Spans of what was seen so far.
func (t *Timeline) Spans(runs []string, phases [][2]string) map[[2]string][]time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seen.Spans(runs, phases)
}

// FollowAll follows the kind of each list in namespace until ctx ends, each in a watch of
// its own, calling seen as Follow does.
func FollowAll(ctx context.Context, c client.WithWatch, namespace string, seen func(client.Object, time.Time), lists ...client.ObjectList) {
	for _, list := range lists {
		go Follow(ctx, c, namespace, list, seen)
	}
}
