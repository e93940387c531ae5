package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/procfs"
)

// runFloor times the bench program through internal/engine, first sequentially, then with
// the manager's parallelism.
func (b *bench) runFloor(ctx context.Context, f *floorEnv) error {
	n, par := b.cfg.FloorRuns, b.cfg.Parallelism
	b.say("floor: warm-up run (not counted)")
	if _, err := f.up(ctx, "warmup"); err != nil {
		return fmt.Errorf("engine floor warm-up failed: %w", err)
	}
	b.say("floor: %d runs, 1 at a time", n)
	seq := f.runFloor(ctx, "seq", n, 1)
	b.say("floor: %d runs, %d at a time", n, par)
	parallel := f.runFloor(ctx, "par", n, par)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(seq.Runs) == 0 {
		return fmt.Errorf("every floor run failed: %s", seq.FirstErr)
	}
	b.floor = &floorResult{Sequential: seq, Parallel: parallel, Parallelism: par, Version: f.eng.Version()}
	row := func(name string, r floorRun) []string {
		s := Summarize(r.Runs)
		return []string{name, fmt.Sprint(len(r.Runs)), fmt.Sprint(r.Failed), secs(s.P50), secs(s.P90), secs(s.Max), secs(r.Wall),
			fmt.Sprintf("%.3f/s", r.Throughput()), secs(r.EngineCPU / time.Duration(max(1, len(r.Runs)+r.Failed)))}
	}
	body := "`pulumi up` of a fresh stack (a first update: `stack init` + `up`) of the bench program through internal/engine, " +
		"file:// backend, passphrase file, engine.BaseEnv (no update check, no plugin download, the CLI's logs bounded), " +
		"STACKWRIGHT_TESTING_ROOT: what the manager gives its engine, without Kubernetes, artifact or status work. " +
		"One warm-up run first (not counted). The manager is up and idle meanwhile.\n\n" +
		table([]string{"batch", "runs", "failed", "median", "p90", "max", "wall", "throughput", "engine CPU / run"}, [][]string{
			row("sequential", seq),
			row(fmt.Sprintf("%d at a time", par), parallel),
		})
	if seq.FirstErr != "" || parallel.FirstErr != "" {
		body += "\nFirst failure:\n\n```\n" + strings.TrimSpace(seq.FirstErr+"\n"+parallel.FirstErr) + "\n```\n"
	}
	b.rep.add("Engine floor", body)

	b.say("floor: the pulumi CLI's own floor, %d runs of each operation", n)
	cli, err := f.runCLIFloor(ctx, b.cfg.Bin, n, par)
	if err != nil {
		return fmt.Errorf("failed to measure the CLI floor: %w", err)
	}
	b.floor.CLI = cli
	b.rep.add("CLI floor", cliFloorSection(cli))
	return nil
}

// floorMedian is what a first update of a new stack costs at the least: the CLI floor's
// median first update, or without it the engine floor's median (0 without a floor). The
// latency and fleet scenarios deploy new stacks, so this is their floor.
func (b *bench) floorMedian() time.Duration {
	switch {
	case b.floor == nil:
		return 0
	case b.floor.CLI != nil && len(b.floor.CLI.First.Runs) > 0:
		return Percentile(b.floor.CLI.First.Runs, 50)
	}
	return Percentile(b.floor.Sequential.Runs, 50)
}

// runLatency applies one Program + Stack at a time and waits for it to be Ready.
func (b *bench) runLatency(ctx context.Context) error {
	type sample struct {
		total, toUpdate, toRunning, running, toReady time.Duration
		updates                                      int
	}
	var samples []sample
	var reruns []time.Duration
	for i := range b.cfg.LatencyRuns {
		name := fmt.Sprintf("latency-%02d", i)
		files := filepath.Join(b.work, "files", nsLatency, name)
		t0 := time.Now()
		if err := b.cluster.client.Create(ctx, programFor(nsLatency, name, b.cfg.Program)); err != nil {
			return fmt.Errorf("failed to create Program %s: %w", name, err)
		}
		if err := b.cluster.client.Create(ctx, benchStack(nsLatency, name, name, files)); err != nil {
			return fmt.Errorf("failed to create Stack %s: %w", name, err)
		}
		if n := b.track.waitReady(ctx, nsLatency, []string{name}, "", 5*time.Minute, time.Hour, nil); n != 1 {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("stack %s not Ready after 5 minutes: %s", name, describeStack(b.track.stack(nsLatency, name)))
		}
		ready, _ := b.track.readyAt(nsLatency, name, "")
		s := sample{total: ready.Sub(t0)}
		ups := b.track.updatesOf(nsLatency, name)
		s.updates = len(ups)
		if len(ups) > 0 {
			sort.Slice(ups, func(i, j int) bool { return ups[i].seen.Before(ups[j].seen) })
			first, last := ups[0], ups[len(ups)-1]
			s.toUpdate = first.seen.Sub(t0)
			s.toRunning = first.run.Sub(first.seen)
			s.running = last.done.Sub(first.run)
			s.toReady = ready.Sub(last.done)
		}
		samples = append(samples, s)
		b.say("latency: %s Ready after %s", name, secs(s.total))
		d, err := b.rerun(ctx, nsLatency, name)
		if err != nil {
			return err
		}
		reruns = append(reruns, d)
		b.say("latency: %s re-run Ready after %s", name, secs(d))
	}
	col := func(f func(sample) time.Duration) []time.Duration {
		var out []time.Duration
		for _, s := range samples {
			out = append(out, f(s))
		}
		return out
	}
	floor := b.floorMedian()
	row := func(name string, ds []time.Duration, withRatio bool) []string {
		r := []string{name, secs(Percentile(ds, 50)), secs(Percentile(ds, 90)), secs(Summarize(ds).Max)}
		if withRatio {
			r = append(r, ratio(Ratio(Percentile(ds, 50), floor)))
		} else {
			r = append(r, "")
		}
		return r
	}
	extra := 0
	for _, s := range samples {
		extra += s.updates - 1
	}
	steady := b.steadyFloor()
	rerunRow := []string{"re-run (reconcile request, config unchanged) → Ready", secs(Percentile(reruns, 50)),
		secs(Percentile(reruns, 90)), secs(Summarize(reruns).Max),
		ratio(Ratio(Percentile(reruns, 50), steady)) + " of the CLI's steady update (" + secs(steady) + ")"}
	body := fmt.Sprintf("%d times, one after the other: create a new Program and a Stack on it (new names each time, "+
		"the earlier ones stay Ready in the namespace), time until the Stack is Ready for its generation. "+
		"The phases are when the harness's watch saw: the Update created, it Running, it finished, the Stack Ready. "+
		"Floor median (the CLI's first update of a new stack, see CLI floor): %s. After each, the Stack is re-run once "+
		"through its reconcile-request annotation (a steady-state update), timed from the annotation to Ready for it.\n\n",
		len(samples), secs(floor)) +
		table([]string{"", "median", "p90", "max", "median / floor median"}, [][]string{
			row("apply → Ready", col(func(s sample) time.Duration { return s.total }), true),
			row("apply → Update created", col(func(s sample) time.Duration { return s.toUpdate }), false),
			row("Update created → Running", col(func(s sample) time.Duration { return s.toRunning }), false),
			row("Running → finished (engine run in the manager)", col(func(s sample) time.Duration { return s.running }), true),
			row("finished → Stack Ready", col(func(s sample) time.Duration { return s.toReady }), false),
			rerunRow,
		})
	if extra > 0 {
		body += fmt.Sprintf("\n%d Updates more than one per Stack were created (retries).\n", extra)
	}
	b.rep.add("Latency (one Stack, apply → Ready)", body)
	return nil
}

// runFleet creates N Programs and Stacks at once and waits until all are Ready.
func (b *bench) runFleet(ctx context.Context) error {
	n, par := b.cfg.N, b.cfg.Parallelism
	floor := b.floorMedian()
	ideal := time.Duration(n) * floor / time.Duration(par)
	timeout := b.cfg.FleetTimeout
	if timeout == 0 {
		guess := ideal
		if guess == 0 {
			guess = time.Duration(n) * 10 * time.Second / time.Duration(par)
		}
		timeout = 4*guess + 5*time.Minute
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("fleet-%05d", i)
	}
	b.fleetNames = names
	before := b.snap(ctx)
	updatesBefore, _, err := b.countUpdates(ctx, nsFleet)
	if err != nil {
		return err
	}

	peakRSS := b.sampleRSS(ctx)
	defer peakRSS()

	t0 := time.Now()
	b.say("fleet: creating %d Programs and Stacks with %d workers (timeout %s)", n, b.cfg.CreateWorkers, timeout.Round(time.Second))
	err = b.forAll(ctx, "create", names, func(name string) error {
		if err := b.cluster.client.Create(ctx, programFor(nsFleet, name, b.cfg.Program)); err != nil {
			return err
		}
		st := benchStack(nsFleet, name, name, filepath.Join(b.work, "files", nsFleet, name))
		st.Spec.Backend = b.ownBackend(b.mgrOpts.dataDir, nsFleet, name)
		return b.cluster.client.Create(ctx, st)
	})
	creation := time.Since(t0)
	if err != nil {
		return err
	}
	b.say("fleet: created in %s", secs(creation))

	// The CPU profile, taken while the fleet is being worked on.
	profPath := b.prefix + ".cpu.pprof"
	var profErr error
	var prof sync.WaitGroup
	prof.Go(func() {
		b.say("fleet: fetching a %d s CPU profile of the manager", b.cfg.ProfileSeconds)
		pctx, cancel := context.WithTimeout(ctx, time.Duration(b.cfg.ProfileSeconds+60)*time.Second)
		defer cancel()
		profErr = b.mgr.profile(pctx, b.cfg.ProfileSeconds, profPath)
	})

	progress := func(ready int) {
		b.say("fleet: %d/%d Ready after %s; Updates: %s; manager %s", ready, n, secs(time.Since(t0)),
			mapString(b.track.phases(nsFleet)), procLine(b.mgr.pid()))
	}
	readyCount := b.track.waitReady(ctx, nsFleet, names, "", timeout, 30*time.Second, progress)
	wall := time.Since(t0)
	after := b.snap(ctx)
	peak := peakRSS()
	prof.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	b.fleetReady = readyCount == n

	var readyTimes []time.Duration
	var last time.Time
	for _, name := range names {
		if at, ok := b.track.readyAt(nsFleet, name, ""); ok {
			readyTimes = append(readyTimes, at.Sub(t0))
			if at.After(last) {
				last = at
			}
		}
	}
	if b.fleetReady {
		wall = last.Sub(t0)
		b.fleetWall = wall
	}
	phases, updates, err := b.countUpdates(ctx, nsFleet)
	if err != nil {
		return err
	}
	total := len(updates)
	for _, c := range updatesBefore {
		total -= c
	}
	failedReasons := map[string]int{}
	for _, u := range updates {
		if u.Status.Phase == v1alpha1.UpdatePhaseFailed {
			reason := "?"
			if c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete); c != nil {
				reason = c.Reason
			}
			failedReasons[reason]++
		}
	}
	rt := Summarize(readyTimes)
	allReady := fmt.Sprintf("%s (%d/%d Ready)", secs(wall), readyCount, n)
	if !b.fleetReady {
		allReady = fmt.Sprintf("not reached: %d/%d Ready after %s", readyCount, n, secs(wall))
	}
	rows := [][]string{
		{"Stacks (each with its own Program)", fmt.Sprint(n)},
		{"creation of the 2N objects", secs(creation)},
		{"start → all Ready", allReady},
		{"Ready since start: p50 / p90 / p99 / max", fmt.Sprintf("%s / %s / %s / %s", secs(rt.P50), secs(rt.P90), secs(rt.P99), secs(rt.Max))},
		{"ideal: N × floor median (CLI first update) / parallelism", fmt.Sprintf("%s (%d × %s / %d)", secs(ideal), n, secs(floor), par)},
		{"wall / ideal", ratio(Ratio(wall, ideal))},
	}
	if b.floor != nil && b.floor.Parallel.Throughput() > 0 {
		measured := time.Duration(float64(n) / b.floor.Parallel.Throughput() * float64(time.Second))
		rows = append(rows, []string{fmt.Sprintf("wall / (N ÷ engine floor throughput at %d at a time)", par),
			fmt.Sprintf("%s (%s)", ratio(Ratio(wall, measured)), secs(measured))})
	}
	if b.floor != nil && b.floor.CLI != nil && b.floor.CLI.First.CPUPerRun() > 0 {
		cores := runtime.NumCPU()
		bound := time.Duration(n) * b.floor.CLI.First.CPUPerRun() / time.Duration(cores)
		rows = append(rows,
			[]string{"CPU bound: N × the CLI's CPU per first update ÷ cores", fmt.Sprintf("%s (%d × %s / %d)", secs(bound), n, secs(b.floor.CLI.First.CPUPerRun()), cores)},
			[]string{"**wall / CPU bound**", ratio(Ratio(wall, bound))})
	}
	if wall > 0 {
		rows = append(rows, []string{"Stacks Ready per minute", fmt.Sprintf("%.1f", float64(readyCount)/wall.Minutes())})
	}
	rows = append(rows,
		[]string{"engine runs started (Update objects created)", fmt.Sprintf("%d (%s)", total, phaseString(phases))},
		[]string{"manager peak RSS during the fleet (sampled 1/s)", MiB(max(peak, after.mgr.RSS))},
	)
	if len(failedReasons) > 0 {
		rows = append(rows, []string{"failed Updates by reason", mapString(failedReasons)})
	}
	rows = append(rows, costRows(before, after)...)
	body := fmt.Sprintf("N Stacks, each with its own Program (%s, own STACKWRIGHT_TESTING_ROOT), created at once "+
		"by %d concurrent clients; times are since the first create. `--max-concurrent-updates %d`.\n\n", programDescription(b.cfg.Program), b.cfg.CreateWorkers, par) +
		table([]string{"fleet", ""}, rows)
	if !b.fleetReady {
		body += "\n" + b.notReady(nsFleet, names)
	}
	body += "\n" + b.profileSection(profPath, profErr)
	b.rep.add(fmt.Sprintf("Fleet (N=%d)", n), body)
	return nil
}

// sampleRSS samples the manager's VmRSS every second until the returned function is
// called, which returns the peak seen (VmHWM is the peak since the manager started, not a
// phase's). Calling it again returns the same peak.
func (b *bench) sampleRSS(ctx context.Context) (peak func() int64) {
	return sampleRSSOf(ctx, b.manager().pid())
}

// notReady summarises the Stacks that are not Ready by condition.
func (b *bench) notReady(ns string, names []string) string {
	byState := map[string][]string{}
	for _, name := range names {
		if _, ok := b.track.readyAt(ns, name, ""); ok {
			continue
		}
		st := b.track.stack(ns, name)
		state := describeStack(st)
		byState[state] = append(byState[state], name)
	}
	var rows [][]string
	for _, k := range slices.Sorted(maps.Keys(byState)) {
		ex := byState[k]
		rows = append(rows, []string{fmt.Sprint(len(ex)), k, strings.Join(ex[:min(3, len(ex))], ", ")})
	}
	return "Stacks not Ready, by state:\n\n" + table([]string{"count", "state (conditions)", "examples"}, rows)
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

// profileSection lists the top functions of the CPU profile with `go tool pprof -top`.
func (b *bench) profileSection(path string, profErr error) string {
	if profErr != nil {
		return fmt.Sprintf("CPU profile: failed: %v\n", profErr)
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=25", b.cfg.Manager, path).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("CPU profile saved to %s; `go tool pprof -top` failed: %v\n```\n%s\n```\n", filepath.Base(path), err, out)
	}
	// Flat costs are mostly the runtime's; the cumulative view names our code paths.
	cum, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=40", b.cfg.Manager, path).CombinedOutput()
	if err != nil {
		cum = []byte(err.Error())
	}
	topPath := b.prefix + ".pprof-top.txt"
	_ = os.WriteFile(topPath, []byte("$ go tool pprof -top -nodecount=25\n"+string(out)+
		"\n$ go tool pprof -top -cum -nodecount=40\n"+string(cum)), 0o644)
	return fmt.Sprintf("CPU profile of the manager (%d s, taken right after the fleet was created) saved to `%s`; "+
		"`go tool pprof -top -nodecount=25` (`%s` also has the cumulative view):\n\n```\n%s```\n",
		b.cfg.ProfileSeconds, filepath.Base(path), filepath.Base(topPath), out)
}

// runIdle watches the Ready fleet for cfg.Idle and measures what the manager spends.
func (b *bench) runIdle(ctx context.Context) error {
	if !b.fleetReady {
		b.say("idle: the fleet is not all Ready; measuring anyway")
	}
	before := b.snap(ctx)
	_, updatesBefore, err := b.countUpdates(ctx, "")
	if err != nil {
		return err
	}
	apiBefore, apiErr := b.cluster.apiserverMetrics(ctx)
	start := time.Now()
	b.say("idle: %s of nothing", b.cfg.Idle)
	if err := waitReporting(ctx, b.cfg.Idle, func() {
		b.say("idle: %s elapsed; manager %s", time.Since(start).Round(time.Second), procLine(b.mgr.pid()))
	}); err != nil {
		return err
	}
	apiAfter, err := b.cluster.apiserverMetrics(ctx)
	apiErr = errors.Join(apiErr, err)
	after := b.snap(ctx)
	_, updatesAfter, err := b.countUpdates(ctx, "")
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, u := range updatesBefore {
		known[u.Namespace+"/"+u.Name] = true
	}
	newUpdates := 0
	var examples []string
	for _, u := range updatesAfter {
		if !known[u.Namespace+"/"+u.Name] {
			newUpdates++
			if len(examples) < 5 {
				examples = append(examples, fmt.Sprintf("%s/%s (%s)", u.Namespace, u.Name, u.Spec.Type))
			}
		}
	}
	ready := 0
	for _, name := range b.fleetNames {
		if st := b.track.stack(nsFleet, name); st != nil && isReady(st) {
			ready++
		}
	}
	total := len(b.fleetNames) + b.cfg.LatencyRuns
	if !b.cfg.has(ScenarioLatency) {
		total = len(b.fleetNames)
	}
	rows := [][]string{
		{"duration", secs(after.at.Sub(before.at))},
		{"Stacks present (fleet + latency)", fmt.Sprint(total)},
		{"fleet Stacks still Ready at the end", fmt.Sprintf("%d/%d", ready, len(b.fleetNames))},
		{"Updates created during idle (should be 0)", fmt.Sprint(newUpdates)},
		{"manager RSS at the start", MiB(before.mgr.RSS)},
	}
	rows = append(rows, costRows(before, after)...)
	rows = append(rows, idleHourRows(after.at.Sub(before.at), before, after, apiBefore, apiAfter, apiErr)...)
	body := "After the fleet is Ready: nothing happens for the configured time. Requests are the manager's own client-go " +
		"counter (`rest_client_requests_total`, scraped from its metrics endpoint before and after), and the API server's " +
		"`apiserver_request_total` read before and after (all clients: the manager's requests, the harness's two lists of " +
		"Updates and its one read of the metrics; long-running watches count once, when they start). Per-hour figures " +
		"are the idle phase's scaled to an hour.\n\n" +
		table([]string{"idle", ""}, rows)
	if len(examples) > 0 {
		body += "\nUpdates created during idle, e.g.: " + strings.Join(examples, ", ") + "\n"
	}
	b.rep.add(fmt.Sprintf("Idle (%s, N=%d)", b.cfg.Idle, len(b.fleetNames)), body)
	return nil
}

// procLine is a one-line summary of a process for progress messages.
func procLine(pid int) string {
	ps, err := procfs.Read(pid)
	if err != nil {
		return "gone: " + err.Error()
	}
	return fmt.Sprintf("RSS %s, CPU %.1f s, engine CPU %.1f s", MiB(ps.RSS), ps.CPU.Seconds(), ps.ChildrenCPU.Seconds())
}

func phaseString(m map[v1alpha1.UpdatePhase]int) string {
	s := map[string]int{}
	for k, v := range m {
		s[string(k)] = v
	}
	return mapString(s)
}

func mapString(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// waitReporting waits for d, or until ctx ends, calling report every minute meanwhile.
func waitReporting(ctx context.Context, d time.Duration, report func()) error {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tk := time.NewTicker(time.Minute)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return nil
		case <-tk.C:
			report()
		}
	}
}

// idleHourRows scales the idle phase's manager CPU and API requests to an hour.
func idleHourRows(d time.Duration, before, after snapshot, apiBefore, apiAfter Metrics, apiErr error) [][]string {
	if d <= 0 {
		return nil
	}
	perHour := func(v float64) string { return fmt.Sprintf("%.0f", v*float64(time.Hour)/float64(d)) }
	rows := [][]string{
		{"manager CPU per idle hour", secs(time.Duration(float64(after.mgr.CPU-before.mgr.CPU) * float64(time.Hour) / float64(d)))},
	}
	if before.metricsErr == nil && after.metricsErr == nil {
		rows = append(rows, []string{"manager API requests per idle hour (its own counter)",
			perHour(after.metrics.Sum("rest_client_requests_total", nil) - before.metrics.Sum("rest_client_requests_total", nil))})
	}
	if apiErr != nil {
		return append(rows, []string{"API server requests per idle hour", "not read: " + apiErr.Error()})
	}
	verbs := map[string]float64{}
	var total float64
	prev := apiBefore.By("apiserver_request_total", "verb")
	for verb, v := range apiAfter.By("apiserver_request_total", "verb") {
		if d := v - prev[verb]; d > 0 {
			verbs[verb] = d
			total += d
		}
	}
	byVerb := make([]string, 0, len(verbs))
	for _, verb := range slices.Sorted(maps.Keys(verbs)) {
		byVerb = append(byVerb, verb+" "+perHour(verbs[verb]))
	}
	return append(rows, []string{"API server requests per idle hour (`apiserver_request_total`, all clients)",
		perHour(total) + " (" + strings.Join(byVerb, ", ") + ")"})
}
