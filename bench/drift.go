package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// driftRun is one run of the drift scenario, filled in step by step.
type driftRun struct {
	names []string
	sched cron.Schedule
	// settled, toReady and toQuiet are the settling after the schedules were set;
	// settling its Updates.
	settled          int
	toReady, toQuiet time.Duration
	settling         []updateSeen
	// The measurement: the window from start to end, drained until m's end.
	start, end time.Time
	slots      []time.Time
	m          *measurement
}

// runDrift gives the first DriftN Stacks of the Ready fleet a drift schedule and counts,
// for DriftWindow, the checks the schedules start and what they cost.
func (b *bench) runDrift(ctx context.Context) error {
	sched, err := (&pulumiv1.DriftSchedule{Cron: b.cfg.DriftCron}).Parse()
	if err != nil {
		return fmt.Errorf("failed to parse the drift cron: %w", err)
	}
	r := &driftRun{names: b.fleetNames[:b.cfg.DriftN], sched: sched}
	n := len(r.names)
	if !b.fleetReady {
		b.say("drift: the fleet is not all Ready; scheduling anyway")
	}
	timeout := b.fleetTimeout(n, b.floorMedian())
	b.say("drift: scheduling `%s` on %d Stacks (each runs one up for the spec change first)", b.cfg.DriftCron, n)
	patched := time.Now()
	gens, err := b.patchDrift(ctx, r.names, &pulumiv1.DriftDetectionSpec{Schedules: []pulumiv1.DriftSchedule{{Cron: b.cfg.DriftCron}}})
	if err != nil {
		return err
	}
	r.settled, r.toReady, r.toQuiet = b.waitSettled(ctx, "drift: schedules set", r.names, gens, timeout)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.settling = b.track.updatesIn(nsFleet, patched, time.Now())
	if r.settled < n {
		b.say("drift: %d/%d Stacks settled after %s; measuring anyway", r.settled, n, secs(r.toReady+r.toQuiet))
	}
	if err := b.countChecks(ctx, r); err != nil {
		return err
	}
	b.rep.add(fmt.Sprintf("Drift detection (%d Stacks, `%s`, %s window)", n, b.cfg.DriftCron, b.cfg.DriftWindow), b.driftReport(r))
	if !b.cfg.has(ScenarioGit) {
		return nil
	}
	// Left in place, the schedules would start checks during the git fleet, on its runners.
	b.say("drift: removing the schedules before the git fleet")
	if gens, err = b.patchDrift(ctx, r.names, nil); err != nil {
		return err
	}
	if settled, toReady, toQuiet := b.waitSettled(ctx, "drift: schedules removed", r.names, gens, timeout); settled < n && ctx.Err() == nil {
		b.rep.add("Drift detection: schedules not all removed", fmt.Sprintf("After the schedules were removed, %d/%d Stacks "+
			"were Ready on the new generation, with no drift check in flight, after %s: the git fleet below shares the runners "+
			"with the rest.\n", settled, n, secs(toReady+toQuiet)))
	}
	return ctx.Err()
}

// countChecks measures the window, then waits for the checks started in it to finish,
// for at most another window and never into the next slot, whose checks are not due in
// the window.
func (b *bench) countChecks(ctx context.Context, r *driftRun) error {
	window := b.cfg.DriftWindow
	r.m = b.measure(ctx)
	defer r.m.release()
	r.start = r.m.before.at
	r.end = r.start.Add(window)
	r.slots = cronSlots(r.sched, r.start, r.end)
	drainUntil := r.end.Add(window)
	if next := r.sched.Next(r.end); !next.IsZero() && next.Add(-time.Second).Before(drainUntil) {
		drainUntil = next.Add(-time.Second)
	}
	inFlight := func() (started, finished int) {
		for _, u := range b.track.updatesIn(nsFleet, r.start, time.Now()) {
			if u.typ == v1alpha1.UpdateTypeDrift {
				started++
				if !u.done.IsZero() {
					finished++
				}
			}
		}
		return started, finished
	}
	b.say("drift: counting checks for %s (%d slots, %d checks due)", window, len(r.slots), len(r.names)*len(r.slots))
	if err := waitReporting(ctx, window, func() {
		started, finished := inFlight()
		b.say("drift: %s elapsed; checks started %d, finished %d; manager %s",
			time.Since(r.start).Round(time.Second), started, finished, procLine(b.mgr.pid()))
	}); err != nil {
		return err
	}
	if started, finished := inFlight(); started > finished {
		b.say("drift: window over; waiting until %s for %d checks in flight", drainUntil.Format("15:04:05"), started-finished)
	}
	for started, finished := inFlight(); started > finished && time.Now().Before(drainUntil); started, finished = inFlight() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	r.m.end(ctx)
	return nil
}

// driftChecks is what the checks of the measured span were, counted from the watch, not
// listed: the manager prunes finished checks.
type driftChecks struct {
	started, succeeded, failed int
	durations, turnarounds     []time.Duration
	others                     []updateSeen
	checked                    map[string]bool
	failedReasons              map[string]int
}

func (b *bench) driftChecks(r *driftRun) driftChecks {
	c := driftChecks{checked: map[string]bool{}, failedReasons: map[string]int{}}
	for _, u := range b.track.updatesIn("", r.start, r.m.after.at) {
		if u.typ != v1alpha1.UpdateTypeDrift {
			c.others = append(c.others, u)
			continue
		}
		c.started++
		if u.done.IsZero() || u.done.After(r.m.after.at) {
			continue
		}
		if u.phase == v1alpha1.UpdatePhaseFailed {
			c.failed++
			reason := u.reason
			if reason == "" {
				reason = "?"
			}
			c.failedReasons[reason]++
		} else {
			c.succeeded++
		}
		c.checked[u.stack] = true
		if !u.started.IsZero() && !u.ended.IsZero() {
			c.durations = append(c.durations, u.ended.Sub(u.started))
		}
		c.turnarounds = append(c.turnarounds, u.done.Sub(u.seen))
	}
	return c
}

// driftConditions counts the scheduled Stacks' DriftDetected conditions at the end.
func (b *bench) driftConditions(names []string) string {
	conds := map[string]int{}
	for _, name := range names {
		state := "no condition"
		if st := b.track.stack(nsFleet, name); st != nil {
			if c := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionDriftDetected); c != nil {
				state = string(c.Status)
			}
		}
		conds[state]++
	}
	text := fmt.Sprintf("True %d, False %d, Unknown %d",
		conds[string(metav1.ConditionTrue)], conds[string(metav1.ConditionFalse)], conds[string(metav1.ConditionUnknown)])
	if c := conds["no condition"]; c > 0 {
		text += fmt.Sprintf(", no condition %d", c)
	}
	return text
}

// driftReport renders the scenario's section.
func (b *bench) driftReport(r *driftRun) string {
	c := b.driftChecks(r)
	n, span, m := len(r.names), r.m.after.at.Sub(r.m.before.at), r.m
	done, due := c.succeeded+c.failed, n*len(r.slots)
	perCheck := func(d time.Duration) string {
		if done == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f s", d.Seconds()/float64(done))
	}
	doneOfDue := "- (no slot in the window)"
	if due > 0 {
		doneOfDue = fmt.Sprintf("%.2f (%d / %d)", float64(done)/float64(due), done, due)
	}
	otherText := "0"
	if len(c.others) > 0 {
		otherText = fmt.Sprintf("%d (%s)", len(c.others), strings.Join(typePhases(c.others), ", "))
	}
	mgrCPU := m.after.mgr.CPU - m.before.mgr.CPU
	rows := [][]string{
		{"Stacks with a drift schedule", fmt.Sprintf("%d of the fleet's %d", n, len(b.fleetNames))},
		{"schedule set → all Ready on the new generation (settling, not measured)", fmt.Sprintf("%s (%d/%d)", secs(r.toReady), r.settled, n)},
		{"… then until no drift check was in flight", secs(r.toQuiet)},
		{"Updates while settling, by type and phase", orNone(typePhases(r.settling))},
		{"measured", fmt.Sprintf("%s window from %s, then %s until the checks it started had finished", b.cfg.DriftWindow,
			r.start.Format("15:04:05"), secs(m.after.at.Sub(r.end)))},
		{"schedule slots in the window", slotString(r.slots)},
		{"checks due (Stacks × slots)", fmt.Sprint(due)},
		{"drift checks started (Updates of type drift)", fmt.Sprint(c.started)},
		{"drift checks finished: succeeded / failed", fmt.Sprintf("%d / %d", c.succeeded, c.failed)},
		{"drift checks not finished at the end", fmt.Sprint(c.started - done)},
		{"checks finished / due", doneOfDue},
		{"Stacks checked at least once", fmt.Sprintf("%d/%d", len(c.checked), n)},
		{"checks finished per minute", fmt.Sprintf("%.1f", float64(done)/span.Minutes())},
		{"check duration (status startTime → endTime, 1 s resolution): median / p90 / max", percentiles(c.durations, 50, 90, 100)},
		{"check Update created → finished (with the wait for a runner): median / p90 / max", percentiles(c.turnarounds, 50, 90, 100)},
		{"engine runs of other types (should be 0)", otherText},
		{"DriftDetected of the scheduled Stacks at the end", b.driftConditions(r.names)},
		{"manager CPU per minute", fmt.Sprintf("%.2f s", mgrCPU.Seconds()/span.Minutes())},
		{"manager CPU per finished check", perCheck(mgrCPU)},
		{"engine CPU per finished check", perCheck(m.after.mgr.ChildrenCPU - m.before.mgr.ChildrenCPU)},
		{"manager peak RSS during the measurement (sampled 1/s)", MiB(m.peakRSS())},
	}
	if len(c.failedReasons) > 0 {
		rows = append(rows, []string{"failed checks by reason", mapString(c.failedReasons)})
	}
	rows = append(rows, m.costRows()...)
	return fmt.Sprintf("The first %d Stacks of the Ready fleet get `spec.driftDetection.schedules: [{cron: \"%s\"}]`. "+
		"The spec change makes each run one ordinary `up` first; that settling is timed on its own. The measurement starts "+
		"when all are Ready on the new generation with no drift check in flight, lasts the window, and goes on until the "+
		"checks started in it have finished (never into the next slot); every count and cost is over that span. A slot is "+
		"due in the window if it falls after its start and not after its end. Checks share `--max-concurrent-updates %d` "+
		"with updates; the manager's CPU includes what the whole fleet costs idle (see Idle).\n\n", n, b.cfg.DriftCron, b.cfg.Parallelism) +
		table([]string{"drift detection", ""}, rows)
}

// patchDrift sets spec.driftDetection of the named fleet Stacks, or removes it when spec is
// nil, and returns the generation each Stack has after the patch.
func (b *bench) patchDrift(ctx context.Context, names []string, spec *pulumiv1.DriftDetectionSpec) (map[string]int64, error) {
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"driftDetection": spec}})
	if err != nil {
		return nil, fmt.Errorf("failed to encode drift patch: %w", err)
	}
	var mu sync.Mutex
	gens := make(map[string]int64, len(names))
	err = b.forAll(ctx, "patch", names, func(name string) error {
		st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: nsFleet, Name: name}}
		if err := b.cluster.client.Patch(ctx, st, client.RawPatch(types.MergePatchType, body)); err != nil {
			return err
		}
		mu.Lock()
		gens[name] = st.Generation
		mu.Unlock()
		return nil
	})
	return gens, err
}

// waitSettled waits until every named fleet Stack is Ready on the generation gens gives it
// (or a later one), then until none has a drift check in flight, so that what follows
// starts between checks. It returns how many got there and how long each wait took.
func (b *bench) waitSettled(ctx context.Context, what string, names []string, gens map[string]int64, timeout time.Duration,
) (settled int, toReady, toQuiet time.Duration) {
	start := time.Now()
	ready := func(st *stackSeen) bool {
		return st.last != nil && st.last.Generation >= gens[st.last.Name] && isReady(st.last)
	}
	progress := func(ready int) {
		b.say("%s: %d/%d Ready on the new generation after %s; Updates: %s; manager %s", what, ready, len(names),
			secs(time.Since(start)), mapString(b.track.phases(nsFleet)), procLine(b.mgr.pid()))
	}
	if settled = b.track.waitStacks(ctx, nsFleet, names, timeout, 30*time.Second, progress, ready); settled < len(names) {
		return settled, time.Since(start), 0
	}
	toReady = time.Since(start)
	settled = b.track.waitStacks(ctx, nsFleet, names, timeout, 30*time.Second, nil, func(st *stackSeen) bool {
		if !ready(st) {
			return false
		}
		cu := st.last.Status.CurrentUpdate
		return cu == nil || cu.Type != string(v1alpha1.UpdateTypeDrift)
	})
	return settled, toReady, time.Since(start) - toReady
}

// cronSlots returns the times sched fires after from and not after to: those a Stack that
// last looked at from is due to be checked at by to.
func cronSlots(sched cron.Schedule, from, to time.Time) []time.Time {
	var out []time.Time
	for t := sched.Next(from); !t.IsZero() && !t.After(to); t = sched.Next(t) {
		out = append(out, t)
	}
	return out
}

// slotString lists a few slots by their time of day, or counts many.
func slotString(slots []time.Time) string {
	if len(slots) == 0 || len(slots) > 6 {
		return fmt.Sprint(len(slots))
	}
	parts := make([]string, len(slots))
	for i, t := range slots {
		parts[i] = t.Format("15:04")
	}
	return fmt.Sprintf("%d (%s)", len(slots), strings.Join(parts, ", "))
}

// typePhases counts Updates by type and phase ("up Succeeded 3, drift Running 1").
func typePhases(ups []updateSeen) []string {
	m := map[string]int{}
	for _, u := range ups {
		m[fmt.Sprintf("%s %s", u.typ, phaseName(u.phase))]++
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s %d", k, m[k]))
	}
	return out
}
