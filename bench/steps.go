package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// The steps the scenarios are made of: create a fleet at once, wait until it is Ready,
// measure what the manager spent meanwhile, change Programs, and the rows every report
// shares. A scenario is these steps in its own order, and its own figures.

// progressEvery is how often a long wait says where it is.
const progressEvery = 30 * time.Second

// numbered returns n names prefix-00000, prefix-00001, ….
func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return out
}

// fleetTimeout bounds the wait for n Stacks whose runs take perRun each: BENCH_FLEET_TIMEOUT
// when set, else four times the ideal (at least 5 s a run, for a floor that was not
// measured) and 5 minutes, so that a slow run is reported rather than cut short.
func (b *bench) fleetTimeout(n int, perRun time.Duration) time.Duration {
	if b.cfg.FleetTimeout > 0 {
		return b.cfg.FleetTimeout
	}
	return 4*time.Duration(n)*max(perRun, 5*time.Second)/time.Duration(b.cfg.Parallelism) + 5*time.Minute
}

// createFleet creates the objects of every key (namespace/name) with create, from
// cfg.CreateWorkers clients at once, and returns when it started and how long it took: a
// fleet's clock starts at its first create.
func (b *bench) createFleet(ctx context.Context, keys []string, create func(ns, name string) error) (start time.Time, took time.Duration, err error) {
	start = time.Now()
	err = b.forAll(ctx, "create", keys, func(k string) error {
		ns, name, _ := strings.Cut(k, "/")
		return create(ns, name)
	})
	return start, time.Since(start), err
}

// readiness is when each of a fleet's Stacks (or instances) was first seen Ready.
type readiness struct {
	start      time.Time
	n, ready   int
	sinceStart []time.Duration
	last       time.Time
	// wall is start → the last one Ready when all are, else start → the end of the wait.
	wall time.Duration
}

func (r readiness) all() bool { return r.ready == r.n }

// allReady is the "start → all Ready" cell.
func (r readiness) allReady() string {
	if !r.all() {
		return fmt.Sprintf("not reached: %d/%d Ready after %s", r.ready, r.n, secs(r.wall))
	}
	return fmt.Sprintf("%s (%d/%d Ready)", secs(r.wall), r.ready, r.n)
}

// waitReady waits until every Stack of keys is Ready on rev ("" any revision) or timeout
// passes, calling progress every progressEvery, and reads when each was.
func (b *bench) waitReady(ctx context.Context, keys []string, rev string, start time.Time, timeout time.Duration, progress func(int)) readiness {
	b.track.waitKeys(ctx, keys, timeout, progressEvery, progress, func(st *stackSeen) bool { return st.readyOn(rev) })
	return b.readiness(keys, start, func(k string) (time.Time, bool) {
		ns, name, _ := strings.Cut(k, "/")
		return b.track.readyAt(ns, name, rev)
	})
}

// waitInstancesReady is waitReady for a template's instances: their own Ready condition.
func (b *bench) waitInstancesReady(ctx context.Context, keys []string, start time.Time, timeout time.Duration, progress func(int)) readiness {
	b.track.waitInstances(ctx, keys, timeout, progressEvery, progress)
	return b.readiness(keys, start, b.track.instanceReadyAt)
}

func (b *bench) readiness(keys []string, start time.Time, readyAt func(string) (time.Time, bool)) readiness {
	r := readiness{start: start, n: len(keys), wall: time.Since(start)}
	for _, k := range keys {
		if at, ok := readyAt(k); ok {
			r.ready++
			r.sinceStart = append(r.sinceStart, at.Sub(start))
			r.last = maxTime(r.last, at)
		}
	}
	if r.all() {
		r.wall = r.last.Sub(start)
	}
	return r
}

// fleetProgress says how far a fleet of n in ns is, its Updates and the manager's state.
func (b *bench) fleetProgress(what, ns string, n int, start time.Time) func(int) {
	return func(ready int) {
		b.say("%s: %d/%d Ready after %s; Updates: %s; manager %s", what, ready, n, secs(time.Since(start)),
			mapString(b.track.phases(ns)), procLine(b.manager().pid()))
	}
}

// measurement is what a manager spent over a span: its cost at both ends and its peak RSS
// (sampled every second: VmHWM is the peak since the process started, not the span's).
type measurement struct {
	b             *bench
	of            *managerProc
	before, after snapshot
	peak          int64
	sampling      func() int64
}

// measure starts a measurement of the scenarios' manager; end ends it, and release (to
// defer) stops the sampling of one that fails before its end.
func (b *bench) measure(ctx context.Context) *measurement {
	return b.measureOf(ctx, b.manager())
}

// measureOf is measure for any manager process.
func (b *bench) measureOf(ctx context.Context, m *managerProc) *measurement {
	return &measurement{b: b, of: m, before: b.snapOf(ctx, m), sampling: sampleRSSOf(ctx, m.pid())}
}

// end takes the manager's cost now and its peak RSS over the span.
func (m *measurement) end(ctx context.Context) {
	m.after = m.b.snapOf(ctx, m.of)
	m.peak = m.sampling()
}

func (m *measurement) release() { m.sampling() }

// peakRSS is the highest RSS seen over the span, its end included.
func (m *measurement) peakRSS() int64 { return max(m.peak, m.after.mgr.RSS) }

// costRows are costRows over the span.
func (m *measurement) costRows() [][]string { return costRows(m.before, m.after) }

// idealRows compare wall with the ideal of n runs of perRun each at the manager's
// parallelism; label says which runs.
func (b *bench) idealRows(label string, wall time.Duration, n int, perRun time.Duration) [][]string {
	par := b.cfg.Parallelism
	ideal := time.Duration(n) * perRun / time.Duration(par)
	return [][]string{
		{label, fmt.Sprintf("%s (%d × %s / %d)", secs(ideal), n, secs(perRun), par)},
		{"wall / ideal", ratio(Ratio(wall, ideal))},
	}
}

// engineThroughputRows compare wall with n first updates at the engine floor's measured
// parallel throughput, which already includes two runs' contention on the machine.
func (b *bench) engineThroughputRows(wall time.Duration, n int) [][]string {
	if b.floor == nil {
		return nil
	}
	return throughputRows(fmt.Sprintf("wall / (N ÷ engine floor throughput at %d at a time)", b.cfg.Parallelism),
		wall, n, b.floor.Parallel.Throughput())
}

// steadyThroughputRows compare wall with n steady updates at the CLI's measured
// throughput at the manager's parallelism.
func (b *bench) steadyThroughputRows(wall time.Duration, n int) [][]string {
	if b.floor == nil || b.floor.CLI == nil {
		return nil
	}
	return throughputRows(fmt.Sprintf("wall / (N ÷ the CLI's steady-update throughput at %d at a time)", b.cfg.Parallelism),
		wall, n, b.floor.CLI.SteadyWide.Throughput())
}

func throughputRows(label string, wall time.Duration, n int, perSecond float64) [][]string {
	if perSecond <= 0 {
		return nil
	}
	measured := time.Duration(float64(n) / perSecond * float64(time.Second))
	return [][]string{{label, fmt.Sprintf("%s (%s)", ratio(Ratio(wall, measured)), secs(measured))}}
}

// percentiles renders the given nearest-rank percentiles of ds, "1.00 s / 2.00 s".
func percentiles(ds []time.Duration, ps ...float64) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = secs(Percentile(ds, p))
	}
	return strings.Join(parts, " / ")
}

// deltaString renders counts by label value, sorted, "GET 12, PATCH 3" ("none" for none).
func deltaString(m map[string]float64) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	return orNone(parts)
}

// changePrograms gives the own Program of each named Stack of ns a new greeting content,
// from cfg.CreateWorkers clients at once, after first doing prepare to the Stack (nil:
// nothing). It returns when each change began and the revision its Stack will report
// once it deploys it.
func (b *bench) changePrograms(ctx context.Context, ns string, names []string, content string,
	prepare func(name string) error,
) (at map[string]time.Time, revs map[string]string, err error) {
	var mu sync.Mutex
	at, revs = map[string]time.Time{}, map[string]string{}
	err = b.forAll(ctx, "change", names, func(name string) error {
		began := time.Now()
		if prepare != nil {
			if err := prepare(name); err != nil {
				return err
			}
		}
		rev, err := b.changeProgram(ctx, ns, name, content)
		mu.Lock()
		at[name], revs[name] = began, rev
		mu.Unlock()
		return err
	})
	return at, revs, err
}

// changeProgram gives Program ns/name's greeting File a new content with a merge patch
// (no read first, so no conflict with the manager's status writes) and returns the
// revision its Stack will report once it deploys it.
func (b *bench) changeProgram(ctx context.Context, ns, name, content string) (string, error) {
	patch, err := json.Marshal(map[string]any{"program": map[string]any{"resources": map[string]any{
		"greeting": map[string]any{"properties": map[string]any{"content": content}}}}})
	if err != nil {
		return "", err
	}
	p := &pulumiv1.Program{}
	p.Namespace, p.Name = ns, name
	if err := b.cluster.client.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return "", fmt.Errorf("failed to change Program %s/%s: %w", ns, name, err)
	}
	return fmt.Sprintf("generation/%d", p.Generation), nil
}

// waitRevisions waits until each Stack of ns in revs is Ready on its revision, and
// returns how many are.
func (b *bench) waitRevisions(ctx context.Context, ns string, revs map[string]string, timeout time.Duration, progress func(int)) int {
	return b.track.waitStacks(ctx, ns, slices.Collect(maps.Keys(revs)), timeout, progressEvery, progress,
		func(st *stackSeen) bool { return st.last != nil && st.readyOn(revs[st.last.Name]) })
}

// firstUpdateSince returns the first Update of Stack ns/name seen at or after since.
func (b *bench) firstUpdateSince(ns, name string, since time.Time) (updateSeen, int, bool) {
	ups := slices.DeleteFunc(b.track.updatesOf(ns, name), func(u updateSeen) bool { return u.seen.Before(since) })
	if len(ups) == 0 {
		return updateSeen{}, 0, false
	}
	first := slices.MinFunc(ups, func(a, z updateSeen) int { return a.seen.Compare(z.seen) })
	return first, len(ups), true
}

// forAll runs fn for every name with cfg.CreateWorkers concurrent workers; verb names what
// fn does to the objects, for the error.
func (b *bench) forAll(ctx context.Context, verb string, names []string, fn func(string) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan string)
	)
	for range b.cfg.CreateWorkers {
		wg.Go(func() {
			for name := range next {
				if err := fn(name); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, name := range names {
		if ctx.Err() != nil {
			break
		}
		next <- name
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("failed to %s %d of %d objects: %w", verb, len(errs), len(names), errors.Join(errs[:min(5, len(errs))]...))
	}
	return ctx.Err()
}

// waitPrograms waits until every Program is Ready (rendered into an artifact), so that no
// fleet's clock includes rendering its program.
func (b *bench) waitPrograms(ctx context.Context, keys []client.ObjectKey) error {
	for _, k := range keys {
		p := &pulumiv1.Program{}
		err := pollUntil(ctx, time.Minute, func() (bool, error) {
			if err := b.cluster.client.Get(ctx, k, p); err != nil {
				return false, err
			}
			c := apimeta.FindStatusCondition(p.Status.Conditions, pulumiv1.ConditionReady)
			return c != nil && c.Status == metav1.ConditionTrue && p.Status.ObservedGeneration == p.Generation, nil
		})
		if err != nil {
			return fmt.Errorf("failed to wait for Program %s to be Ready: %w", k, err)
		}
	}
	return nil
}

// pollUntil calls done every 100 ms until it returns true or an error, ctx ends or timeout
// passes. Setup steps only: the figures' times come from the tracker's watch.
func pollUntil(ctx context.Context, timeout time.Duration, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pause waits d, or until ctx ends: for what a step set off in the manager to be over
// before the next clock starts.
func pause(ctx context.Context, d time.Duration) error {
	return waitReporting(ctx, d, func() {})
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// notReady summarises, by state, the Stacks of ns not seen Ready on rev ("" any).
func (b *bench) notReady(ns string, names []string, rev string) string {
	byState := map[string][]string{}
	for _, name := range names {
		if _, ok := b.track.readyAt(ns, name, rev); ok {
			continue
		}
		state := stackState(b.track.stack(ns, name))
		byState[state] = append(byState[state], name)
	}
	if len(byState) == 0 {
		return ""
	}
	var rows [][]string
	for _, k := range slices.Sorted(maps.Keys(byState)) {
		ex := byState[k]
		rows = append(rows, []string{fmt.Sprint(len(ex)), k, strings.Join(ex[:min(3, len(ex))], ", ")})
	}
	title := "Stacks not Ready"
	if rev != "" {
		title += " at " + rev
	}
	return title + ", by state:\n\n" + table([]string{"count", "state (conditions)", "examples"}, rows)
}

// stackState is describeStack with what holds a Stack back from a revision: its
// HeldBack condition and its last successful revision.
func stackState(st *pulumiv1.Stack) string {
	state := describeStack(st)
	if st == nil {
		return state
	}
	if c := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionHeldBack); c != nil {
		state += fmt.Sprintf("; HeldBack=%s %s", c.Status, c.Reason)
	}
	if lu := st.Status.LastUpdate; lu != nil {
		state += fmt.Sprintf("; last successful %s", lu.LastSuccessfulCommit)
	}
	return state
}

func describeStack(st *pulumiv1.Stack) string {
	if st == nil {
		return "never seen"
	}
	var parts []string
	for _, t := range []string{pulumiv1.ConditionReady, pulumiv1.ConditionReconciling, pulumiv1.ConditionStalled} {
		if c := apimeta.FindStatusCondition(st.Status.Conditions, t); c != nil {
			msg := c.Message
			if len(msg) > 160 {
				msg = msg[:160] + "…"
			}
			parts = append(parts, fmt.Sprintf("%s=%s %s: %s", t, c.Status, c.Reason, strings.ReplaceAll(msg, "|", "\\|")))
		}
	}
	if len(parts) == 0 {
		return "no conditions"
	}
	return strings.Join(parts, "; ")
}
