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

// latencySample is one apply → Ready of the latency scenario, split into the phases the
// watch saw.
type latencySample struct {
	total, toUpdate, toRunning, running, toReady time.Duration
	updates                                      int
	// rerun is the same Stack re-run once through its reconcile request, → Ready.
	rerun time.Duration
}

// runLatency applies one Program + Stack at a time and waits for it to be Ready.
func (b *bench) runLatency(ctx context.Context) error {
	var samples []latencySample
	for i := range b.cfg.LatencyRuns {
		s, err := b.applyOne(ctx, fmt.Sprintf("latency-%02d", i))
		if err != nil {
			return err
		}
		samples = append(samples, s)
	}
	b.rep.add("Latency (one Stack, apply → Ready)", b.latencyReport(samples))
	return nil
}

// applyOne creates Program and Stack name, times it to Ready, then re-runs it once.
func (b *bench) applyOne(ctx context.Context, name string) (latencySample, error) {
	files := filepath.Join(b.work, "files", nsLatency, name)
	t0 := time.Now()
	if err := b.cluster.client.Create(ctx, programFor(nsLatency, name, b.cfg.Program)); err != nil {
		return latencySample{}, fmt.Errorf("failed to create Program %s: %w", name, err)
	}
	if err := b.cluster.client.Create(ctx, benchStack(nsLatency, name, name, files)); err != nil {
		return latencySample{}, fmt.Errorf("failed to create Stack %s: %w", name, err)
	}
	if n := b.track.waitReady(ctx, nsLatency, []string{name}, "", 5*time.Minute, time.Hour, nil); n != 1 {
		if ctx.Err() != nil {
			return latencySample{}, ctx.Err()
		}
		return latencySample{}, fmt.Errorf("stack %s not Ready after 5 minutes: %s", name, describeStack(b.track.stack(nsLatency, name)))
	}
	ready, _ := b.track.readyAt(nsLatency, name, "")
	s := latencySample{total: ready.Sub(t0)}
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
	b.say("latency: %s Ready after %s", name, secs(s.total))
	d, err := b.rerun(ctx, nsLatency, name)
	if err != nil {
		return s, err
	}
	s.rerun = d
	b.say("latency: %s re-run Ready after %s", name, secs(d))
	return s, nil
}

func (b *bench) latencyReport(samples []latencySample) string {
	col := func(f func(latencySample) time.Duration) []time.Duration {
		var out []time.Duration
		for _, s := range samples {
			out = append(out, f(s))
		}
		return out
	}
	floor, steady := b.floorMedian(), b.steadyFloor()
	// against < 0: a phase no floor compares with.
	row := func(name string, ds []time.Duration, against time.Duration, of string) []string {
		r := []string{name, percentiles(ds, 50), percentiles(ds, 90), percentiles(ds, 100), ""}
		if against >= 0 {
			r[4] = ratio(Ratio(Percentile(ds, 50), against)) + of
		}
		return r
	}
	extra := 0
	for _, s := range samples {
		extra += s.updates - 1
	}
	body := fmt.Sprintf("%d times, one after the other: create a new Program and a Stack on it (new names each time, "+
		"the earlier ones stay Ready in the namespace), time until the Stack is Ready for its generation. "+
		"The phases are when the harness's watch saw: the Update created, it Running, it finished, the Stack Ready. "+
		"Floor median (the CLI's first update of a new stack, see CLI floor): %s. After each, the Stack is re-run once "+
		"through its reconcile-request annotation (a steady-state update), timed from the annotation to Ready for it.\n\n",
		len(samples), secs(floor)) +
		table([]string{"", "median", "p90", "max", "median / floor median"}, [][]string{
			row("apply → Ready", col(func(s latencySample) time.Duration { return s.total }), floor, ""),
			row("apply → Update created", col(func(s latencySample) time.Duration { return s.toUpdate }), -1, ""),
			row("Update created → Running", col(func(s latencySample) time.Duration { return s.toRunning }), -1, ""),
			row("Running → finished (engine run in the manager)", col(func(s latencySample) time.Duration { return s.running }), floor, ""),
			row("finished → Stack Ready", col(func(s latencySample) time.Duration { return s.toReady }), -1, ""),
			row("re-run (reconcile request, config unchanged) → Ready", col(func(s latencySample) time.Duration { return s.rerun }),
				steady, " of the CLI's steady update ("+secs(steady)+")"),
		})
	if extra > 0 {
		body += fmt.Sprintf("\n%d Updates more than one per Stack were created (retries).\n", extra)
	}
	return body
}

// runFleet creates N Programs and Stacks at once and waits until all are Ready.
func (b *bench) runFleet(ctx context.Context) error {
	n := b.cfg.N
	b.fleetNames = numbered("fleet", n)
	keys := keysOf(nsFleet, b.fleetNames)
	timeout := b.fleetTimeout(n, b.floorMedian())
	m := b.measure(ctx)
	defer m.release()
	updatesBefore, _, err := b.countUpdates(ctx, nsFleet)
	if err != nil {
		return err
	}
	b.say("fleet: creating %d Programs and Stacks with %d workers (timeout %s)", n, b.cfg.CreateWorkers, timeout.Round(time.Second))
	start, creation, err := b.createFleet(ctx, keys, func(ns, name string) error {
		return b.createOwnStack(ctx, b.mgrOpts.dataDir, ns, name, nil)
	})
	if err != nil {
		return err
	}
	b.say("fleet: created in %s", secs(creation))
	profile := b.profileWhile(ctx)
	r := b.waitReady(ctx, keys, "", start, timeout, b.fleetProgress("fleet", nsFleet, n, start))
	m.end(ctx)
	profiled := profile()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	b.fleetReady = r.all()
	if b.fleetReady {
		b.fleetWall = r.wall
	}
	runs, err := b.updateRows(ctx, nsFleet, updatesBefore, m)
	if err != nil {
		return err
	}
	rows := [][]string{
		{"Stacks (each with its own Program)", fmt.Sprint(n)},
		{"creation of the 2N objects", secs(creation)},
		{"start → all Ready", r.allReady()},
		{"Ready since start: p50 / p90 / p99 / max", percentiles(r.sinceStart, 50, 90, 99, 100)},
	}
	rows = append(rows, b.idealRows("ideal: N × floor median (CLI first update) / parallelism", r.wall, n, b.floorMedian())...)
	rows = append(rows, b.engineThroughputRows(r.wall, n)...)
	rows = append(rows, b.cpuBoundRows(r.wall, n)...)
	if r.wall > 0 {
		rows = append(rows, []string{"Stacks Ready per minute", fmt.Sprintf("%.1f", float64(r.ready)/r.wall.Minutes())})
	}
	rows = append(append(rows, runs...), m.costRows()...)
	body := fmt.Sprintf("N Stacks, each with its own Program (%s, own STACKWRIGHT_TESTING_ROOT), created at once "+
		"by %d concurrent clients; times are since the first create. `--max-concurrent-updates %d`.\n\n",
		programDescription(b.cfg.Program), b.cfg.CreateWorkers, b.cfg.Parallelism) + table([]string{"fleet", ""}, rows)
	if !b.fleetReady {
		body += "\n" + b.notReady(nsFleet, b.fleetNames, "")
	}
	b.rep.add(fmt.Sprintf("Fleet (N=%d)", n), body+"\n"+profiled)
	return nil
}

// createOwnStack creates Program and Stack name in ns, the Stack on that Program of its
// own with files of its own, labelled labels, its state where the manager whose data
// directory is dataDir keeps it.
func (b *bench) createOwnStack(ctx context.Context, dataDir, ns, name string, labels map[string]string) error {
	if err := b.cluster.client.Create(ctx, programFor(ns, name, b.cfg.Program)); err != nil {
		return err
	}
	st := benchStack(ns, name, name, filepath.Join(b.work, "files", ns, name))
	st.Labels = labels
	st.Spec.Backend = b.ownBackend(dataDir, ns, name)
	return b.cluster.client.Create(ctx, st)
}

// cpuBoundRows compare wall with the CPU the CLI's first updates of n new stacks need on
// this machine's cores: no scheduler finishes the same engine work sooner.
func (b *bench) cpuBoundRows(wall time.Duration, n int) [][]string {
	if b.floor == nil || b.floor.CLI == nil || b.floor.CLI.First.CPUPerRun() <= 0 {
		return nil
	}
	cores, perRun := runtime.NumCPU(), b.floor.CLI.First.CPUPerRun()
	bound := time.Duration(n) * perRun / time.Duration(cores)
	return [][]string{
		{"CPU bound: N × the CLI's CPU per first update ÷ cores", fmt.Sprintf("%s (%d × %s / %d)", secs(bound), n, secs(perRun), cores)},
		{"**wall / CPU bound**", ratio(Ratio(wall, bound))},
	}
}

// updateRows count the Updates of ns created since before (a count by phase), with the
// manager's peak RSS over m and the failed ones' reasons.
func (b *bench) updateRows(ctx context.Context, ns string, before map[v1alpha1.UpdatePhase]int, m *measurement) ([][]string, error) {
	phases, updates, err := b.countUpdates(ctx, ns)
	if err != nil {
		return nil, err
	}
	total := len(updates)
	for _, c := range before {
		total -= c
	}
	failed := map[string]int{}
	for _, u := range updates {
		if u.Status.Phase == v1alpha1.UpdatePhaseFailed {
			reason := "?"
			if c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete); c != nil {
				reason = c.Reason
			}
			failed[reason]++
		}
	}
	rows := [][]string{
		{"engine runs started (Update objects created)", fmt.Sprintf("%d (%s)", total, phaseString(phases))},
		{"manager peak RSS during the fleet (sampled 1/s)", MiB(m.peakRSS())},
	}
	if len(failed) > 0 {
		rows = append(rows, []string{"failed Updates by reason", mapString(failed)})
	}
	return rows, nil
}

// profileWhile fetches a CPU profile of the manager while the caller goes on; the returned
// function waits for it and renders it.
func (b *bench) profileWhile(ctx context.Context) (section func() string) {
	path := b.prefix + ".cpu.pprof"
	var err error
	var wg sync.WaitGroup
	wg.Go(func() {
		b.say("fleet: fetching a %d s CPU profile of the manager", b.cfg.ProfileSeconds)
		pctx, cancel := context.WithTimeout(ctx, time.Duration(b.cfg.ProfileSeconds+60)*time.Second)
		defer cancel()
		err = b.manager().profile(pctx, b.cfg.ProfileSeconds, path)
	})
	return func() string {
		wg.Wait()
		return b.profileSection(path, err)
	}
}

// sampleRSS samples the manager's VmRSS every second until the returned function is
// called, which returns the peak seen (VmHWM is the peak since the manager started, not a
// phase's). Calling it again returns the same peak.
func (b *bench) sampleRSS(ctx context.Context) (peak func() int64) {
	return sampleRSSOf(ctx, b.manager().pid())
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
