package bench

import (
	"context"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The rollout scenario: one shared Program, its Stacks labelled into rings, a StackRollout
// over them, and a change of the Program rolled out ring by ring.
const (
	// nsRollout holds the scenario's Program, Stacks and StackRollout.
	nsRollout = "bench-rollout"
	// rolloutProgram is the one Program every Stack of the scenario runs.
	rolloutProgram = "shared"
	// rolloutName is the StackRollout's name, rolloutApp the app label that selects its Stacks.
	rolloutName = "fleet"
	rolloutApp  = "rollout"
	// rolloutRingLabel is the label the waves are made of (byLabel, values 0..3).
	rolloutRingLabel = "ring"
)

// rolloutSteps are the cumulative shares of the fleet the rings reach, in percent: rings of
// 1%, 9%, 30% and 60%, each boundary rounded up as a StackRollout's percentage steps are.
var rolloutSteps = []int{1, 10, 40, 100}

// rolloutRings returns the size of each ring of n Stacks: ring i ends at ceil(n ×
// rolloutSteps[i] / 100), at least one Stack after the previous ring while Stacks remain.
// Rings may be empty only when n is smaller than the number of rings.
func rolloutRings(n int) []int {
	sizes := make([]int, len(rolloutSteps))
	from := 0
	for i, pct := range rolloutSteps {
		upTo := int(math.Ceil(float64(n) * float64(pct) / 100))
		upTo = min(max(upTo, from+1), n)
		sizes[i] = upTo - from
		from = upTo
	}
	return sizes
}

// ringOf returns the ring of the i-th of n Stacks (in name order).
func ringOf(sizes []int, i int) int {
	for r, s := range sizes {
		if i < s {
			return r
		}
		i -= s
	}
	return len(sizes) - 1
}

// waveTimes is what the harness saw of one wave of the rollout of the target: each time is
// when a watch saw it (zero: never).
type waveTimes struct {
	ring   int
	stacks []string
	// opened: the rollout's status first showed the wave as the current one.
	opened time.Time
	// firstCreated: the wave's first Update at the target was first seen; firstRun: the
	// first of them seen Running (a runner started it), firstStart its status.startTime.
	firstCreated, firstRun time.Time
	firstStart             time.Time
	// lastReady: the wave's last Stack first seen Ready with lastSuccessfulCommit the target.
	lastReady time.Time
	// ready counts the Stacks seen Ready at the target.
	ready int
	// early counts the wave's Updates at the target first seen before the previous wave's
	// last Stack was Ready (a wave that started too soon).
	early int
}

// boundary is the wait between two waves.
type boundary struct {
	from, to int
	// overhead is to.firstRun − from.lastReady − bake: what the rollout adds between waves.
	overhead time.Duration
	// toOpened, toCreated and toRun split it: the rollout opening the next wave, its first
	// Update created, and a runner starting it, each since the previous wave's last Ready.
	toOpened, toCreated, toRun time.Duration
}

// boundaries are the waits between consecutive waves with both ends seen; bake is
// subtracted from each overhead (the wait the rollout is asked for).
func boundaries(waves []waveTimes, bake time.Duration) []boundary {
	var out []boundary
	for i := 0; i+1 < len(waves); i++ {
		a, z := waves[i], waves[i+1]
		if a.lastReady.IsZero() || z.firstRun.IsZero() {
			continue
		}
		since := func(t time.Time) time.Duration {
			if t.IsZero() {
				return 0
			}
			return t.Sub(a.lastReady)
		}
		out = append(out, boundary{from: a.ring, to: z.ring, overhead: z.firstRun.Sub(a.lastReady) - bake,
			toOpened: since(z.opened), toCreated: since(z.firstCreated), toRun: since(z.firstRun)})
	}
	return out
}

// rolloutStack is a Stack of the shared Program in ring ring; its own stack name (the
// Stacks share a project) and STACKWRIGHT_TESTING_ROOT.
func rolloutStack(name string, ring int, files string) *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsRollout,
			Labels: map[string]string{"app": rolloutApp, rolloutRingLabel: fmt.Sprint(ring)}},
		Spec: pulumiv1.StackSpec{
			Stack:      name,
			ProgramRef: &pulumiv1.ProgramReference{Name: rolloutProgram},
			Config:     map[string]apiextensionsv1.JSON{"message": *jsonOf(greetingMessage)},
			EnvRefs:    map[string]pulumiv1.ResourceRef{"STACKWRIGHT_TESTING_ROOT": literal(files)},
		},
	}
}

// benchRollout is the StackRollout over the scenario's Stacks: one wave per ring, each
// wave all at once, bake as given, no gate.
func benchRollout(rings int, bake time.Duration) *v1alpha1.StackRollout {
	values := make([]string, rings)
	for i := range values {
		values[i] = fmt.Sprint(i)
	}
	return &v1alpha1.StackRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsRollout, Name: rolloutName},
		Spec: v1alpha1.StackRolloutSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": rolloutApp}},
			Waves:    v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: rolloutRingLabel, Values: values}},
			BakeTime: &metav1.Duration{Duration: bake},
		},
	}
}

// rolloutRun is one run of the rollout scenario, filled in step by step.
type rolloutRun struct {
	n      int
	sizes  []int
	names  []string
	ring   map[string]int
	bake   time.Duration
	ro     *v1alpha1.StackRollout
	gen1   string
	target string
	// deployRows are the first deploy's figures (not the scenario's).
	deployRows [][]string
	change     time.Time
	// rolled counts the Stacks Ready at target; idleErr says why the rollout was not
	// seen Idle at target.
	rolled  int
	idleErr error
	m       *measurement
}

// runRollout deploys a fleet on one shared Program without a rollout, puts a StackRollout
// over it, changes the Program and times the change's way through the four rings, in
// particular the rollout's own wait between a wave's last Stack Ready and the next wave's
// first runner start.
func (b *bench) runRollout(ctx context.Context) error {
	r := &rolloutRun{n: b.cfg.RolloutN, sizes: rolloutRings(b.cfg.RolloutN), names: numbered("stack", b.cfg.RolloutN),
		ring: map[string]int{}, bake: b.cfg.RolloutBake}
	for i, name := range r.names {
		r.ring[name] = ringOf(r.sizes, i)
	}
	stopWatch, err := b.track.watchRollouts(ctx)
	if err != nil {
		return err
	}
	defer stopWatch()
	prog, err := b.deployRolloutFleet(ctx, r)
	if err != nil {
		return err
	}
	if err := b.startRollout(ctx, r); err != nil {
		return err
	}
	r.m = b.measure(ctx)
	defer r.m.release()
	if err := b.changeRevision(ctx, r, prog); err != nil {
		return err
	}
	b.waitRolledOut(ctx, r)
	r.m.end(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := b.cluster.client.Get(ctx, client.ObjectKeyFromObject(r.ro), r.ro); err != nil {
		return fmt.Errorf("failed to read StackRollout %s: %w", r.ro.Name, err)
	}
	b.rep.add(fmt.Sprintf("Rollout (N=%d, 4 waves, bakeTime %s)", r.n, r.bake), b.rolloutReport(r))
	return nil
}

// deployRolloutFleet creates the shared Program and the ringed Stacks on it, without a
// rollout, and waits until all are Ready on its first generation: the fleet's own time,
// reported apart, not the figure.
func (b *bench) deployRolloutFleet(ctx context.Context, r *rolloutRun) (*pulumiv1.Program, error) {
	prog := benchProgram(nsRollout, rolloutProgram)
	t0 := time.Now()
	if err := b.cluster.client.Create(ctx, prog); err != nil {
		return nil, fmt.Errorf("failed to create Program %s: %w", rolloutProgram, err)
	}
	if err := b.waitPrograms(ctx, []client.ObjectKey{client.ObjectKeyFromObject(prog)}); err != nil {
		return nil, err
	}
	progReady := time.Since(t0)
	timeout := b.fleetTimeout(r.n, b.floorMedian())
	files := filepath.Join(b.work, "files", nsRollout)
	keys := keysOf(nsRollout, r.names)
	b.say("rollout: creating %d Stacks on one Program in rings of %v (timeout %s)", r.n, r.sizes, timeout.Round(time.Second))
	start, creation, err := b.createFleet(ctx, keys, func(_, name string) error {
		return b.cluster.client.Create(ctx, rolloutStack(name, r.ring[name], filepath.Join(files, name)))
	})
	if err != nil {
		return nil, err
	}
	r.gen1 = fmt.Sprintf("generation/%d", prog.Generation)
	deployed := b.waitReady(ctx, keys, r.gen1, start, timeout, b.fleetProgress("rollout: first deploy", nsRollout, r.n, start))
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r.deployRows = [][]string{
		{"Stacks (one shared Program)", fmt.Sprint(r.n)},
		{"rings (byLabel ring=0..3): Stacks each", fmt.Sprintf("%v", r.sizes)},
		{"Program created → Ready (before the start)", secs(progReady)},
		{"creation of the N Stacks", secs(creation)},
	}
	if !deployed.all() {
		r.deployRows = append(r.deployRows, []string{"start → all Ready at " + r.gen1,
			fmt.Sprintf("not reached: %d/%d after %s", deployed.ready, r.n, secs(deployed.wall))})
		b.rep.add(fmt.Sprintf("Rollout (N=%d): first deploy (failed)", r.n),
			table([]string{"first deploy", ""}, r.deployRows)+"\n"+b.notReady(nsRollout, r.names, r.gen1))
		return nil, fmt.Errorf("%d of %d Stacks not Ready at %s", r.n-deployed.ready, r.n, r.gen1)
	}
	r.deployRows = append(r.deployRows, []string{"start → all Ready at " + r.gen1, secs(deployed.wall)})
	r.deployRows = append(r.deployRows, b.idealRows("ideal: N × floor median (CLI first update) / parallelism", deployed.wall, r.n, b.floorMedian())...)
	b.say("rollout: first deploy: all %d Ready after %s", r.n, secs(deployed.wall))
	return prog, nil
}

// startRollout puts the StackRollout over the Ready fleet and waits until it is Idle at the
// first generation and every Stack reports it; then what its creation set off (a reconcile
// of every Stack) is let end before the clock starts.
func (b *bench) startRollout(ctx context.Context, r *rolloutRun) error {
	r.ro = benchRollout(len(r.sizes), r.bake)
	ro := r.ro
	t0 := time.Now()
	if err := b.cluster.client.Create(ctx, ro); err != nil {
		return fmt.Errorf("failed to create StackRollout %s: %w", ro.Name, err)
	}
	err := pollUntil(ctx, 2*time.Minute, func() (bool, error) {
		if err := b.cluster.client.Get(ctx, client.ObjectKeyFromObject(ro), ro); err != nil {
			return false, err
		}
		st := &ro.Status
		return st.Phase == v1alpha1.RolloutIdle && st.Stable != nil && st.Stable.Revision == r.gen1 && st.ObservedGeneration == ro.Generation &&
			apimeta.IsStatusConditionTrue(st.Conditions, pulumiv1.ConditionReady), nil
	})
	if err != nil {
		b.rep.add(fmt.Sprintf("Rollout (N=%d) (failed)", r.n), table([]string{"first deploy", ""}, r.deployRows)+
			"\nThe StackRollout did not become Idle at "+r.gen1+" within 2 minutes:\n\n"+describeRollout(ro))
		return fmt.Errorf("StackRollout %s not Idle at %s: %w", ro.Name, r.gen1, err)
	}
	idle := time.Since(t0)
	reporting := b.track.waitStacks(ctx, nsRollout, r.names, 2*time.Minute, progressEvery, nil, func(st *stackSeen) bool {
		s := st.last.Status.Stackwright
		return s != nil && s.Rollout != nil && s.Rollout.Name == rolloutName && s.Rollout.Available != nil && s.Rollout.Available.Revision == r.gen1
	})
	if reporting < r.n {
		return fmt.Errorf("only %d of %d Stacks report StackRollout %s 2 minutes after its creation", reporting, r.n, rolloutName)
	}
	r.deployRows = append(r.deployRows,
		[]string{"StackRollout created → Idle at " + r.gen1 + " and Ready", secs(idle)},
		[]string{"StackRollout created → every Stack reports it", secs(time.Since(t0))})
	return pause(ctx, 10*time.Second)
}

// changeRevision gives the shared Program's greeting File a new content, so that every
// Stack has a real change, rolled out as the Program's next generation.
func (b *bench) changeRevision(ctx context.Context, r *rolloutRun, prog *pulumiv1.Program) error {
	if err := b.cluster.client.Get(ctx, client.ObjectKeyFromObject(prog), prog); err != nil {
		return fmt.Errorf("failed to read Program %s: %w", rolloutProgram, err)
	}
	r.target = fmt.Sprintf("generation/%d", prog.Generation+1)
	greeting := prog.Program.Resources["greeting"]
	greeting.Properties["content"] = *jsonOf("${message} (" + r.target + ")")
	prog.Program.Resources["greeting"] = greeting
	b.say("rollout: changing Program %s to %s (timeout %s)", rolloutProgram, r.target, b.rolloutTimeout(r).Round(time.Second))
	r.change = time.Now()
	if err := b.cluster.client.Update(ctx, prog); err != nil {
		return fmt.Errorf("failed to change Program %s: %w", rolloutProgram, err)
	}
	if got := fmt.Sprintf("generation/%d", prog.Generation); got != r.target {
		return fmt.Errorf("program %s is at %s after the change, not %s", rolloutProgram, got, r.target)
	}
	return nil
}

// rolloutTimeout bounds the change's way through the waves: each wave's runs and its bake.
func (b *bench) rolloutTimeout(r *rolloutRun) time.Duration {
	return 4*time.Duration(r.n)*max(b.steadyFloor(), 5*time.Second)/time.Duration(b.cfg.Parallelism) +
		4*time.Duration(len(r.sizes))*r.bake + 5*time.Minute
}

// waitRolledOut waits until every Stack is Ready at the target, then for the rollout to
// record its completion, which it does right after the last Stack's Ready.
func (b *bench) waitRolledOut(ctx context.Context, r *rolloutRun) {
	progress := func(ready int) {
		ro, _ := b.track.rollout(nsRollout, rolloutName, "", "")
		where := "not seen"
		if ro != nil {
			where = fmt.Sprintf("%s, wave %q, %d/%d updated", ro.Status.Phase, ro.Status.WaveName, ro.Status.Updated, ro.Status.Stacks)
		}
		_, ph := b.track.updatesSince(nsRollout, r.change)
		b.say("rollout: %d/%d Ready at %s after %s; rollout %s; Updates since the change: %s; manager %s", ready, r.n, r.target,
			secs(time.Since(r.change)), where, mapString(ph), procLine(b.mgr.pid()))
	}
	r.rolled = b.track.waitReady(ctx, nsRollout, r.names, r.target, b.rolloutTimeout(r), progressEvery, progress)
	r.idleErr = pollUntil(ctx, time.Minute, func() (bool, error) {
		_, idle := b.track.rollout(nsRollout, rolloutName, r.target, milestoneIdle)
		return !idle.IsZero(), nil
	})
}

// rolloutUps is what the Updates after the change were, Stack by Stack.
type rolloutUps struct {
	// perStack counts the Stacks by their ups at the target (should be 1 each); notOne
	// names a few that are not; others counts Updates of another revision or type.
	perStack map[int]int
	notOne   []string
	others   int
	// wallEnd is when the last Stack was seen Ready at the target.
	wallEnd time.Time
}

// rolloutWaves reads what was seen, wave by wave (the rings as labelled; the rollout's
// planned waves are compared in the report).
func (b *bench) rolloutWaves(r *rolloutRun) ([]waveTimes, rolloutUps) {
	waves := make([]waveTimes, len(r.sizes))
	for i := range waves {
		waves[i].ring = i
		_, waves[i].opened = b.track.rollout(nsRollout, rolloutName, r.target, waveOpened(i))
	}
	ups := rolloutUps{perStack: map[int]int{}}
	byStack := map[string][]updateSeen{}
	for _, name := range r.names {
		byStack[name] = b.track.updatesOf(nsRollout, name)
		wt := &waves[r.ring[name]]
		wt.stacks = append(wt.stacks, name)
		if at, ok := b.track.readyAt(nsRollout, name, r.target); ok {
			wt.ready++
			wt.lastReady = maxTime(wt.lastReady, at)
			ups.wallEnd = maxTime(ups.wallEnd, at)
		}
		k := 0
		for _, u := range byStack[name] {
			if !u.seen.After(r.change) {
				continue
			}
			if u.revision != r.target || u.typ != v1alpha1.UpdateTypeUp {
				ups.others++
				continue
			}
			k++
			wt.firstCreated = minTime(wt.firstCreated, u.seen)
			if !u.run.IsZero() {
				wt.firstRun = minTime(wt.firstRun, u.run)
			}
			if !u.started.IsZero() {
				wt.firstStart = minTime(wt.firstStart, u.started)
			}
		}
		ups.perStack[k]++
		if k != 1 && len(ups.notOne) < 5 {
			ups.notOne = append(ups.notOne, fmt.Sprintf("%s (%d)", name, k))
		}
	}
	for i := 1; i < len(waves); i++ {
		prev := waves[i-1].lastReady
		for _, name := range waves[i].stacks {
			for _, u := range byStack[name] {
				if u.revision == r.target && !prev.IsZero() && u.seen.Before(prev) {
					waves[i].early++
				}
			}
		}
	}
	return waves, ups
}

// rolloutReport renders the scenario's section: the change's figures, per wave, per
// boundary, and the first deploy's apart.
func (b *bench) rolloutReport(r *rolloutRun) string {
	waves, ups := b.rolloutWaves(r)
	since := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return secs(t.Sub(r.change))
	}
	steady, par := b.steadyFloor(), b.cfg.Parallelism
	waveRows := make([][]string, 0, len(waves))
	for _, wt := range waves {
		dur := time.Duration(0)
		if !wt.firstRun.IsZero() && wt.ready == len(wt.stacks) {
			dur = wt.lastReady.Sub(wt.firstRun)
		}
		// A wave's runs go par at a time: a wave of one Stack is one run long.
		ideal := time.Duration((len(wt.stacks)+par-1)/par) * steady
		waveRows = append(waveRows, []string{fmt.Sprint(wt.ring), fmt.Sprintf("%d (%d Ready)", len(wt.stacks), wt.ready),
			since(wt.opened), since(wt.firstCreated), since(wt.firstRun), since(wt.firstStart), since(wt.lastReady),
			secs(dur), secs(ideal), ratio(Ratio(dur, ideal)), fmt.Sprint(wt.early)})
	}
	var overheads []time.Duration
	var boundRows [][]string
	for _, bd := range boundaries(waves, r.bake) {
		overheads = append(overheads, bd.overhead)
		boundRows = append(boundRows, []string{fmt.Sprintf("%d → %d", bd.from, bd.to), secs(bd.toOpened), secs(bd.toCreated),
			secs(bd.toRun), secs(bd.overhead)})
	}
	ov := Summarize(overheads)
	wall := time.Duration(0)
	all := fmt.Sprintf("not reached: %d/%d Ready at %s after %s", r.rolled, r.n, r.target, secs(r.m.after.at.Sub(r.change)))
	if r.rolled == r.n {
		wall = ups.wallEnd.Sub(r.change)
		all = fmt.Sprintf("%s (%d/%d)", secs(wall), r.rolled, r.n)
	}
	_, idle := b.track.rollout(nsRollout, rolloutName, r.target, milestoneIdle)
	idleAt := since(idle)
	if r.idleErr != nil {
		idleAt = "not seen: " + r.idleErr.Error()
	}
	_, progressing := b.track.rollout(nsRollout, rolloutName, r.target, milestoneProgressing)
	rows := [][]string{
		{"Stacks; waves (rings 0..3)", fmt.Sprintf("%d; %v", r.n, r.sizes)},
		{"change → rollout Progressing (seen)", since(progressing)},
		{"change → first runner start of wave 0 (seen Running)", since(waves[0].firstRun)},
		{"change → all Ready at " + r.target, all},
		{"change → rollout Idle with stable " + r.target + " (seen)", idleAt},
	}
	rows = append(rows, b.idealRows("ideal: N × floor median (CLI steady update) / parallelism", wall, r.n, steady)...)
	rows = append(rows, b.steadyThroughputRows(wall, r.n)...)
	rows = append(rows,
		[]string{fmt.Sprintf("rollout overhead between waves: max of %d (= p99: nearest rank of %d samples)", len(overheads), len(overheads)),
			fmt.Sprintf("%s (median %s, min %s)", secs(ov.Max), secs(ov.P50), secs(ov.Min))},
		[]string{"sum of the overheads (wall time the waves add)", secs(sumDurations(overheads))},
		[]string{"ups at " + r.target + " per Stack (should be 1 each)", countsString(ups.perStack) + exampleString(ups.notOne)},
		[]string{"other Updates created after the change (other revision or type; should be 0)", fmt.Sprint(ups.others)},
		[]string{"manager peak RSS during the rollout (sampled 1/s)", MiB(r.m.peakRSS())},
	)
	rows = append(rows, r.m.costRows()...)
	body := b.rolloutIntro(r) + table([]string{"rollout", ""}, rows) +
		"\nPer wave (times since the change):\n\n" +
		table([]string{"ring", "Stacks", "opened", "first Update", "first Running", "first startTime", "last Ready", "duration", "ideal", "duration / ideal", "early"}, waveRows) +
		"\nPer boundary (since the previous wave's last Stack Ready):\n\n" +
		table([]string{"waves", "→ rollout opened the next", "→ its first Update", "→ its first Running", "overhead (− bakeTime)"}, boundRows) +
		"\n" + plannedMatches(r.ro, waves) +
		"\nFirst deploy (before the StackRollout existed; not the figure):\n\n" + table([]string{"first deploy", ""}, r.deployRows)
	if r.rolled < r.n || r.idleErr != nil {
		body += "\nThe rollout did not complete. StackRollout status at the end:\n\n" + describeRollout(r.ro) +
			"\n" + b.notReady(nsRollout, r.names, r.target)
	}
	return body
}

func (b *bench) rolloutIntro(r *rolloutRun) string {
	return fmt.Sprintf("%d Stacks on one shared Program in `%s` (the bench program; each Stack its own stack name and "+
		"`STACKWRIGHT_TESTING_ROOT`), labelled `app=%s` and `%s=0..3` in rings of 1%%, 9%%, 30%% and 60%% (cumulative "+
		"1%%, 10%%, 40%%, 100%%, each rounded up, as a rollout's percentage steps are). First deployed without a "+
		"rollout (the fleet's own time, not the figure), then a StackRollout `%s` is created (`waves.byLabel` "+
		"ring 0,1,2,3, `maxParallel: 0` (a whole wave at once), `bakeTime: %s`, no gate) and, once it is Idle at %s "+
		"and every Stack reports it, the Program's `greeting` File gets a new content: %s, one real change per Stack. "+
		"`--max-concurrent-updates %d`. Times are since the change, when the harness's watches saw them: the "+
		"rollout's status (wave opened), an Update created, an Update Running (a runner started it; *startTime* is its "+
		"`status.startTime`, truncated to the second, so it may come before the others), a Stack Ready with "+
		"`lastSuccessfulCommit` %s. A wave's *duration* is its first runner start → its last Stack Ready; its *ideal* "+
		"⌈its Stacks / parallelism⌉ × the CLI's steady update (which changes nothing, where each of these ups changes "+
		"one File: the ideals are a little low). "+
		"The rollout's *overhead* at a boundary is the next wave's first runner start (seen Running) − the previous "+
		"wave's last Stack Ready − bakeTime, split into the rollout opening the next wave, its first Update created and a "+
		"runner starting it. *early* counts a wave's Updates created before the previous wave was all Ready (should be 0). "+
		"With 3 boundaries, p99 is the max.\n\n",
		r.n, nsRollout, rolloutApp, rolloutRingLabel, rolloutName, r.bake, r.gen1, r.target, b.cfg.Parallelism, r.target)
}

// plannedMatches compares the rollout's waves (its status, at the end) with the rings the
// harness labelled.
func plannedMatches(ro *v1alpha1.StackRollout, waves []waveTimes) string {
	st := &ro.Status
	if len(st.Waves) != len(waves) {
		return fmt.Sprintf("The rollout planned %d waves, not %d: %s\n", len(st.Waves), len(waves), waveNames(st.Waves))
	}
	for i, wv := range st.Waves {
		if !slices.Equal(slices.Sorted(slices.Values(wv.Stacks)), slices.Sorted(slices.Values(waves[i].stacks))) {
			return fmt.Sprintf("The rollout's wave %d (%s, %d Stacks) is not ring %d (%d Stacks).\n", i, wv.Name, len(wv.Stacks), i, len(waves[i].stacks))
		}
	}
	return fmt.Sprintf("The rollout's planned waves are the rings (%s).\n", waveNames(st.Waves))
}

func waveNames(ws []v1alpha1.RolloutWaveStatus) string {
	parts := make([]string, 0, len(ws))
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("%s: %d, %s", w.Name, len(w.Stacks), w.State))
	}
	return strings.Join(parts, "; ")
}

// describeRollout renders a rollout's status for a report.
func describeRollout(ro *v1alpha1.StackRollout) string {
	st := &ro.Status
	rev := func(r *v1alpha1.RolloutRevision) string {
		if r == nil {
			return "-"
		}
		return r.Revision
	}
	rows := [][]string{
		{"phase", string(st.Phase)},
		{"stable / target / aborted", fmt.Sprintf("%s / %s / %s", rev(st.Stable), rev(st.Target), rev(st.Aborted))},
		{"wave", fmt.Sprintf("%d (%s)", st.Wave, st.WaveName)},
		{"updated / stacks", fmt.Sprintf("%d / %d", st.Updated, st.Stacks)},
		{"observedGeneration / generation", fmt.Sprintf("%d / %d", st.ObservedGeneration, ro.Generation)},
	}
	for _, w := range st.Waves {
		rows = append(rows, []string{"wave " + w.Name, fmt.Sprintf("%s, %d Stacks, %d released, %d updated", w.State, len(w.Stacks), w.Released, w.Updated)})
	}
	for _, c := range st.Conditions {
		rows = append(rows, []string{"condition " + c.Type, strings.ReplaceAll(fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message), "|", "\\|")})
	}
	if len(st.FailedStacks) > 0 {
		rows = append(rows, []string{"failed Stacks", strings.Join(st.FailedStacks, ", ")})
	}
	return table([]string{"StackRollout " + ro.Name, ""}, rows)
}

func sumDurations(ds []time.Duration) time.Duration {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s
}

// countsString renders how many Stacks had each count, "1 up: 40 Stacks".
func countsString(m map[int]int) string {
	keys := slices.Collect(maps.Keys(m))
	sort.Ints(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d: %d Stacks", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func exampleString(ex []string) string {
	if len(ex) == 0 {
		return ""
	}
	return " (e.g. " + strings.Join(ex, ", ") + ")"
}
