package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/keyfile"
	"github.com/stackwright/stackwright/internal/procfs"
)

// The shards scenario: two managers share one fleet by label, each with its own
// --watch-label-selector and --leader-election-id, as two manager Deployments would.
const (
	// nsShards holds the scenario's Programs and Stacks; the shard managers watch only it.
	nsShards = "bench-shards"
	// shardLabel is the label the fleet is split by: half a, half b.
	shardLabel = "shard"
	// shardsMoved is how many Stacks are relabelled from shard a to b.
	shardsMoved = 20
	// shardsSettle is how long Updates are still counted once the moved Stacks are Ready.
	shardsSettle = 15 * time.Second
)

// shard is one of the scenario's two managers.
type shard struct {
	// name is the label value (a, b), selector its manager's --watch-label-selector.
	name, selector string
	mgr            *managerProc
	log            *logWatch
	before, after  snapshot
	peak           func() int64
}

// shardSelectors are the two managers' complementary selectors: a Stack labelled a goes to
// the first, every other (b, or no label at all) to the second.
var shardSelectors = [][2]string{{"a", shardLabel + "=a"}, {"b", shardLabel + "!=a"}}

// shardOf is the shard of the i-th Stack of the fleet: every other one.
func shardOf(i int) string {
	if i%2 == 0 {
		return "a"
	}
	return "b"
}

// runnerPID is the process id in a local executor's identity, local/<host>/<pid>/<random>.
func runnerPID(runner string) (int, bool) {
	parts := strings.Split(runner, "/")
	if len(parts) != 4 || parts[0] != "local" {
		return 0, false
	}
	pid, err := strconv.Atoi(parts[2])
	return pid, err == nil
}

// snapOf is snap for any manager process.
func (b *bench) snapOf(ctx context.Context, m *managerProc) snapshot {
	s := snapshot{at: time.Now()}
	s.mgr, _ = procfs.Read(m.pid())
	if b.cluster.apiserver != 0 {
		s.apiserver, _ = procfs.Read(b.cluster.apiserver)
	}
	if b.cluster.etcd != 0 {
		s.etc, _ = procfs.Read(b.cluster.etcd)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s.metrics, s.metricsErr = Scrape(sctx, m.metricsURL)
	return s
}

// sampleRSSOf is sampleRSS for any process.
func sampleRSSOf(ctx context.Context, pid int) (peak func() int64) {
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg  sync.WaitGroup
		top int64
	)
	wg.Go(func() {
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			if ps, err := procfs.Read(pid); err == nil {
				top = max(top, ps.RSS)
			}
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	})
	return sync.OnceValue(func() int64 {
		cancel()
		wg.Wait()
		return top
	})
}

// fleetCost is the single manager's cost over the fleet scenario, for the shards
// scenario to compare with.
type fleetCost struct {
	n             int
	wall          time.Duration
	before, after snapshot
}

// runFleetMeasured runs the fleet scenario and keeps the manager's cost over it.
func (b *bench) runFleetMeasured(ctx context.Context) error {
	before := b.snap(ctx)
	if err := b.runFleet(ctx); err != nil {
		return err
	}
	if b.fleetReady {
		b.fleetCost = &fleetCost{n: len(b.fleetNames), wall: b.fleetWall, before: before, after: b.snap(ctx)}
	}
	return nil
}

// shardData prepares the data directory the two managers share, with its inputs key made
// before either starts (each would otherwise make its own at start). One directory: the
// local executor keeps a namespace's file:// state below its data directory and refuses a
// backend elsewhere, so a Stack moved from one shard to the other keeps its state only if
// both read the same directory (two Deployments on one ReadWriteMany volume).
func shardData(work string) (string, error) {
	dir := filepath.Join(work, "shards-data")
	if _, err := keyfile.Load(filepath.Join(dir, "inputs.key")); err != nil {
		return "", err
	}
	return dir, nil
}

// runShards stops the scenarios' manager and runs a fleet on two managers sharded by
// label; then moves Stacks from one shard to the other. It runs last: the scenarios'
// manager is not started again.
func (b *bench) runShards(ctx context.Context) error {
	n, par := b.cfg.ShardsN, b.cfg.Parallelism
	title := fmt.Sprintf("Shards (N=%d over two managers)", n)
	b.say("shards: stopping the scenarios' manager (pid %d): the two shards take over", b.mgr.pid())
	if _, err := b.stopManagerOnPurpose(2 * time.Minute); err != nil {
		return fmt.Errorf("failed to stop the manager: %w", err)
	}
	data, err := shardData(b.work)
	if err != nil {
		return fmt.Errorf("failed to prepare the shards' data directory: %w", err)
	}

	sctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	var stopping atomic.Bool
	var shards []*shard
	defer func() {
		stopping.Store(true)
		for _, s := range shards {
			b.say("shards: stopping shard %s's manager (pid %d)", s.name, s.mgr.pid())
			if err := s.mgr.stop(2 * time.Minute); err != nil {
				b.say("shards: %v", err)
			}
		}
	}()
	for _, sel := range shardSelectors {
		s := &shard{name: sel[0], selector: sel[1]}
		o := b.mgrOpts
		o.dataDir = data
		o.logPath = fmt.Sprintf("%s.shard-%s.manager.log", b.prefix, s.name)
		o.extra = append(slices.Clone(b.mgrOpts.extra),
			"--watch-namespaces="+nsShards,
			"--watch-label-selector="+s.selector,
			"--leader-elect",
			"--leader-election-id=stackwright-bench-shard-"+s.name,
			"--leader-election-namespace="+nsShards,
		)
		b.say("shards: starting shard %s's manager (--watch-label-selector %q; log %s)", s.name, s.selector, o.logPath)
		if s.mgr, err = startManager(sctx, o); err != nil {
			return fmt.Errorf("failed to start shard %s's manager: %w", s.name, err)
		}
		shards = append(shards, s)
		s.log = tailLog(sctx, o.logPath, restartLogPoll)
		go func() {
			select {
			case <-s.mgr.done:
				if !stopping.Load() {
					fail(fmt.Errorf("shard %s's manager exited unexpectedly (%w); see %s:\n%s", s.name, s.mgr.exitErr(),
						s.mgr.logPath, tailFile(s.mgr.logPath, 3000)))
				}
			case <-sctx.Done():
			}
		}()
	}
	// Each leads its own Lease and has started its Stack workers before the clock starts.
	for _, s := range shards {
		err := pollUntil(sctx, 2*time.Minute, func() (bool, error) {
			_, _, workers, err := s.log.state()
			return !workers.IsZero(), err
		})
		if err != nil {
			return fmt.Errorf("shard %s's Stack controller did not start within 2 minutes: %w", s.name, errors.Join(err, context.Cause(sctx)))
		}
	}
	pidShard := map[int]string{}
	for _, s := range shards {
		pidShard[s.mgr.pid()] = s.name
		s.before = b.snapOf(sctx, s.mgr)
		s.peak = sampleRSSOf(sctx, s.mgr.pid())
		defer s.peak()
	}

	names := make([]string, n)
	of := map[string]string{}
	count := map[string]int{}
	for i := range names {
		names[i] = fmt.Sprintf("shard-%05d", i)
		of[names[i]] = shardOf(i)
		count[of[names[i]]]++
	}
	floor := b.floorMedian()
	ideal := time.Duration(n) * floor / time.Duration(par)
	timeout := b.cfg.FleetTimeout
	if timeout == 0 {
		timeout = 4*time.Duration(n)*max(floor, 5*time.Second)/time.Duration(par) + 5*time.Minute
	}
	t0 := time.Now()
	b.say("shards: creating %d Programs and Stacks, %d labelled a and %d b (timeout %s)", n, count["a"], count["b"], timeout.Round(time.Second))
	err = b.forAll(sctx, "create", names, func(name string) error {
		if err := b.cluster.client.Create(sctx, programFor(nsShards, name, b.cfg.Program)); err != nil {
			return err
		}
		st := benchStack(nsShards, name, name, filepath.Join(b.work, "files", nsShards, name))
		st.Labels = map[string]string{shardLabel: of[name]}
		st.Spec.Backend = b.ownBackend(data, nsShards, name)
		return b.cluster.client.Create(sctx, st)
	})
	creation := time.Since(t0)
	if err != nil {
		return errors.Join(err, context.Cause(sctx))
	}
	progress := func(ready int) {
		parts := []string{}
		for _, s := range shards {
			parts = append(parts, fmt.Sprintf("shard %s %s", s.name, procLine(s.mgr.pid())))
		}
		b.say("shards: %d/%d Ready after %s; Updates: %s; %s", ready, n, secs(time.Since(t0)),
			mapString(b.track.phases(nsShards)), strings.Join(parts, "; "))
	}
	readyCount := b.track.waitReady(sctx, nsShards, names, "", timeout, 30*time.Second, progress)
	for _, s := range shards {
		s.after = b.snapOf(sctx, s.mgr)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := context.Cause(sctx); err != nil {
		return err
	}
	var last time.Time
	lastOf := map[string]time.Time{}
	readyOf := map[string]int{}
	var readyTimes []time.Duration
	for _, name := range names {
		if at, ok := b.track.readyAt(nsShards, name, ""); ok {
			readyTimes = append(readyTimes, at.Sub(t0))
			last = maxTime(last, at)
			lastOf[of[name]] = maxTime(lastOf[of[name]], at)
			readyOf[of[name]]++
		}
	}
	wall := last.Sub(t0)

	// Who ran what.
	_, deployed, err := b.countUpdates(sctx, nsShards)
	if err != nil {
		return err
	}
	firstUpdates := map[string]bool{}
	perStack := map[string]int{}
	runBy := map[string]map[string]int{} // Stack's shard → runner's shard → Updates
	var wrong, unknown []string
	for _, u := range deployed {
		firstUpdates[u.Name] = true
		st := u.Spec.StackName
		perStack[st]++
		who := "?"
		if pid, ok := runnerPID(u.Status.Runner); ok && pidShard[pid] != "" {
			who = pidShard[pid]
		}
		if runBy[of[st]] == nil {
			runBy[of[st]] = map[string]int{}
		}
		runBy[of[st]][who]++
		switch {
		case who == "?":
			unknown = append(unknown, fmt.Sprintf("%s (%q)", u.Name, u.Status.Runner))
		case who != of[st]:
			wrong = append(wrong, fmt.Sprintf("%s of %s (shard %s) run by shard %s", u.Name, st, of[st], who))
		}
	}
	counts := map[int]int{}
	var notOne []string
	for _, name := range names {
		counts[perStack[name]]++
		if perStack[name] != 1 && len(notOne) < 5 {
			notOne = append(notOne, fmt.Sprintf("%s (%d)", name, perStack[name]))
		}
	}

	rt := Summarize(readyTimes)
	allReady := fmt.Sprintf("%s (%d/%d Ready)", secs(wall), readyCount, n)
	if readyCount < n {
		allReady = fmt.Sprintf("not reached: %d/%d Ready after %s", readyCount, n, secs(time.Since(t0)))
	}
	rows := [][]string{
		{"Stacks (each with its own Program), labelled a / b", fmt.Sprintf("%d (%d / %d)", n, count["a"], count["b"])},
		{"creation of the 2N objects", secs(creation)},
		{"**start → all Ready**", allReady},
		{"Ready since start: p50 / p90 / p99 / max", fmt.Sprintf("%s / %s / %s / %s", secs(rt.P50), secs(rt.P90), secs(rt.P99), secs(rt.Max))},
		{"ideal: N × floor median (CLI first update) / parallelism of one manager (2 cores)", fmt.Sprintf("%s (%d × %s / %d)", secs(ideal), n, secs(floor), par)},
		{"wall / ideal", ratio(Ratio(wall, ideal))},
	}
	if b.floor != nil && b.floor.Parallel.Throughput() > 0 {
		measured := time.Duration(float64(n) / b.floor.Parallel.Throughput() * float64(time.Second))
		rows = append(rows, []string{fmt.Sprintf("wall / (N ÷ engine floor throughput at %d at a time)", par),
			fmt.Sprintf("%s (%s)", ratio(Ratio(wall, measured)), secs(measured))})
	}
	rows = append(rows,
		[]string{"**Updates per Stack** (must be 1: no Stack run by both)", countsString(counts) + exampleString(notOne)},
		[]string{"**Updates run by the manager of the Stack's shard** (status.runner's pid)", fmt.Sprintf("%d of %d", len(deployed)-len(wrong)-len(unknown), len(deployed))},
		[]string{"… Updates by Stack's shard → runner's shard", runByString(runBy)},
	)
	if len(wrong) > 0 {
		rows = append(rows, []string{"… run by the other shard", fmt.Sprintf("%d, e.g. %s", len(wrong), strings.Join(wrong[:min(3, len(wrong))], "; "))})
	}
	if len(unknown) > 0 {
		rows = append(rows, []string{"… runner not one of the two managers", fmt.Sprintf("%d, e.g. %s", len(unknown), strings.Join(unknown[:min(3, len(unknown))], "; "))})
	}

	per := b.shardCostTable(shards, count, readyOf, lastOf, t0, n)

	// The move: shardsMoved Stacks of shard a relabelled b, and their Programs changed.
	var inA []string
	for _, name := range names {
		if of[name] == "a" {
			inA = append(inA, name)
		}
	}
	moved := spread(inA, shardsMoved)
	isMoved := map[string]bool{}
	for _, name := range moved {
		isMoved[name] = true
	}
	var mu sync.Mutex
	movedAt, revs := map[string]time.Time{}, map[string]string{}
	label := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"b"}}}`, shardLabel)
	content := "${message} (moved to shard b)"
	b.say("shards: relabelling %d Stacks from shard a to b and changing their Programs", len(moved))
	moveStart := time.Now()
	err = b.forAll(sctx, "move", moved, func(name string) error {
		at := time.Now()
		st := &pulumiv1.Stack{}
		st.Namespace, st.Name = nsShards, name
		if err := b.cluster.client.Patch(sctx, st, client.RawPatch(types.MergePatchType, label)); err != nil {
			return fmt.Errorf("failed to relabel: %w", err)
		}
		rev, err := b.changeProgram(sctx, nsShards, name, content)
		mu.Lock()
		movedAt[name], revs[name] = at, rev
		mu.Unlock()
		return err
	})
	if err != nil {
		return errors.Join(err, context.Cause(sctx))
	}
	movedReady := b.track.waitStacks(sctx, nsShards, moved, 10*time.Minute, 30*time.Second, func(k int) {
		b.say("shards: %d/%d moved Stacks Ready at their new revision after %s", k, len(moved), secs(time.Since(moveStart)))
	}, func(st *stackSeen) bool { return st.last != nil && st.readyOn(revs[st.last.Name]) })
	if err := waitReporting(sctx, shardsSettle, func() {}); err != nil {
		return errors.Join(err, context.Cause(sctx))
	}
	_, all, err := b.countUpdates(sctx, nsShards)
	if err != nil {
		return err
	}
	newPer := map[string][]v1alpha1.Update{}
	others := 0
	var otherEx []string
	for _, u := range all {
		if firstUpdates[u.Name] {
			continue
		}
		if isMoved[u.Spec.StackName] {
			newPer[u.Spec.StackName] = append(newPer[u.Spec.StackName], u)
			continue
		}
		others++
		if len(otherEx) < 3 {
			otherEx = append(otherEx, fmt.Sprintf("%s of %s (%s)", u.Name, u.Spec.StackName, u.Spec.Type))
		}
	}
	var toReady, toRun []time.Duration
	exactlyOneByB := 0
	movedCounts := map[int]int{}
	var moveIssues []string
	var touchedByA []string
	aLog := shards[0].log
	for _, name := range moved {
		ups := newPer[name]
		movedCounts[len(ups)]++
		if len(ups) == 1 {
			pid, _ := runnerPID(ups[0].Status.Runner)
			if pidShard[pid] == "b" {
				exactlyOneByB++
			} else if len(moveIssues) < 5 {
				moveIssues = append(moveIssues, fmt.Sprintf("%s run by %q", name, ups[0].Status.Runner))
			}
		} else if len(moveIssues) < 5 {
			moveIssues = append(moveIssues, fmt.Sprintf("%s: %d new Updates", name, len(ups)))
		}
		for _, u := range b.track.updatesOf(nsShards, name) {
			if !u.seen.Before(moveStart) && !u.run.IsZero() {
				toRun = append(toRun, u.run.Sub(movedAt[name]))
				break
			}
		}
		if at, ok := b.track.readyAt(nsShards, name, revs[name]); ok {
			toReady = append(toReady, at.Sub(movedAt[name]))
		}
		// Shard a logs a reconcile only of a Stack it still sees; one that left its
		// selector is NotFound in its cache and logs nothing. Allow a reconcile in flight.
		if at, ok := aLog.lastAt(key(nsShards, name)); ok && at.After(movedAt[name].Add(2*time.Second)) {
			touchedByA = append(touchedByA, name)
		}
	}
	moveRows := [][]string{
		{"Stacks relabelled a → b, each then given a new Program content", fmt.Sprint(len(moved))},
		{"Ready at the new revision", fmt.Sprintf("%d/%d", movedReady, len(moved))},
		{"**each got exactly one new Update, run by shard b's manager**", fmt.Sprintf("%d of %d%s", exactlyOneByB, len(moved), exampleString(moveIssues))},
		{"new Updates per moved Stack", countsString(movedCounts)},
		{"new Updates of Stacks not moved (should be 0)", fmt.Sprint(others) + exampleString(otherEx)},
		{"moved Stacks shard a still reconciled > 2 s after their relabel (log; should be 0)", fmt.Sprint(len(touchedByA)) + exampleString(touchedByA[:min(3, len(touchedByA))])},
		{"**relabel + change → Ready**: median / p99 / max (n)", pctRow(toReady)},
		{"relabel + change → runner start (Update seen Running): median / p99 / max (n)", pctRow(toRun)},
	}

	body := fmt.Sprintf("The scenarios' manager is stopped; two managers with the same flags take over, each with "+
		"`--watch-namespaces=%s`, `--leader-elect`, its own `--leader-election-id` (`stackwright-bench-shard-a`, `-b`) "+
		"and `--watch-label-selector` `%s` and `%s` (complementary: `!=` also takes Stacks without the label), and one "+
		"shared `--data-dir` (two Deployments on one ReadWriteMany volume): the local executor keeps a namespace's "+
		"file:// state below its data directory and refuses a file:// backend anywhere else, so a Stack moved to the "+
		"other shard keeps its state only if both read the same directory. Programs are not sharded: both managers "+
		"render every Program of the namespace. "+
		"`--max-concurrent-updates %d` each: %d engine runs at once on this machine's %d cores. "+
		"N Stacks, each with its own Program, every other one labelled `%s=a` and `%s=b`, created at once by %d clients "+
		"once both managers lead and have started their Stack workers; times since the first create. "+
		"Each manager's CPU, RSS, API requests (its own `rest_client_requests_total`) and reconciles are from "+
		"just before the creation to all Ready. The runner of an Update is the local executor's "+
		"`local/<host>/<pid>/<random>`: the pid names the shard.\n\n",
		nsShards, shardSelectors[0][1], shardSelectors[1][1], par, 2*par, runtime.NumCPU(), shardLabel, shardLabel, b.cfg.CreateWorkers) +
		table([]string{"shards", ""}, rows) + "\nPer manager:\n\n" + per
	if readyCount < n {
		body += "\n" + b.notReady(nsShards, names, "")
	}
	body += fmt.Sprintf("\nThen %d Stacks of shard a (spread over its names) are relabelled `%s=b` and their Programs "+
		"given a new `greeting` content (merge patches, one Stack after the other per client); times from each Stack's "+
		"relabel. New Updates are counted %s after the last moved Stack was Ready.\n\n", len(moved), shardLabel, shardsSettle) +
		table([]string{"move", ""}, moveRows)
	if movedReady < len(moved) {
		var late []string
		for _, name := range moved {
			if _, ok := b.track.readyAt(nsShards, name, revs[name]); !ok {
				late = append(late, name)
			}
		}
		body += "\n" + b.notReady(nsShards, late, "the new revision")
	}
	b.rep.add(title, body)
	return nil
}

// runByString renders Updates by Stack's shard and runner's shard, "a → a 1000, b → b 1000".
func runByString(m map[string]map[string]int) string {
	var parts []string
	for _, from := range slices.Sorted(maps.Keys(m)) {
		for _, to := range slices.Sorted(maps.Keys(m[from])) {
			parts = append(parts, fmt.Sprintf("%s → %s %d", from, to, m[from][to]))
		}
	}
	return orNone(parts)
}

// shardCostTable compares the two managers, their sum and the fleet scenario's single
// manager (per Stack, when the fleet ran).
func (b *bench) shardCostTable(shards []*shard, count, readyOf map[string]int, lastOf map[string]time.Time, t0 time.Time, n int) string {
	type costs struct {
		cpu, engine     time.Duration
		requests        float64
		rss, hwm        int64
		stackRec, upRec float64
		progRec         float64
		methods         map[string]float64
		dur             time.Duration
	}
	of := func(before, after snapshot, peak int64) costs {
		c := costs{cpu: after.mgr.CPU - before.mgr.CPU, engine: after.mgr.ChildrenCPU - before.mgr.ChildrenCPU,
			rss: max(peak, after.mgr.RSS), hwm: after.mgr.HWM, dur: after.at.Sub(before.at)}
		if before.metricsErr == nil && after.metricsErr == nil {
			c.requests = after.metrics.Sum("rest_client_requests_total", nil) - before.metrics.Sum("rest_client_requests_total", nil)
			c.methods = DeltaBy(before.metrics, after.metrics, "rest_client_requests_total", "method")
			rec := DeltaBy(before.metrics, after.metrics, "controller_runtime_reconcile_total", "controller")
			c.stackRec, c.upRec, c.progRec = rec["stack"], rec["update"], rec["program-controller"]
		}
		return c
	}
	var cs []costs
	var sum costs
	sum.methods = map[string]float64{}
	for _, s := range shards {
		c := of(s.before, s.after, s.peak())
		cs = append(cs, c)
		sum.cpu += c.cpu
		sum.engine += c.engine
		sum.requests += c.requests
		sum.rss += c.rss
		sum.hwm += c.hwm
		sum.stackRec += c.stackRec
		sum.upRec += c.upRec
		sum.progRec += c.progRec
		for k, v := range c.methods {
			sum.methods[k] += v
		}
	}
	var fleet *costs
	if fc := b.fleetCost; fc != nil {
		c := of(fc.before, fc.after, 0)
		fleet = &c
	}
	perStack := func(v float64, stacks int) string { return fmt.Sprintf("%.2f", v/float64(max(1, stacks))) }
	methods := func(m map[string]float64) string {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
		}
		return orNone(parts)
	}
	header := []string{""}
	for _, s := range shards {
		header = append(header, fmt.Sprintf("shard %s (`%s`)", s.name, s.selector))
	}
	header = append(header, "a + b")
	if fleet != nil {
		header = append(header, fmt.Sprintf("fleet scenario, one manager (N=%d)", b.fleetCost.n), "a + b per Stack / fleet per Stack")
	}
	row := func(name string, f func(c costs, stacks int) string, cmp func(c costs) float64) []string {
		r := []string{name}
		for i, c := range cs {
			r = append(r, f(c, count[shards[i].name]))
		}
		r = append(r, f(sum, n))
		if fleet != nil {
			r = append(r, f(*fleet, b.fleetCost.n))
			if cmp != nil {
				r = append(r, fmt.Sprintf("%.2f×", (cmp(sum)/float64(n))/(cmp(*fleet)/float64(b.fleetCost.n))))
			} else {
				r = append(r, "")
			}
		}
		return r
	}
	rows := [][]string{
		func() []string {
			r := []string{"Stacks; Ready"}
			for _, s := range shards {
				r = append(r, fmt.Sprintf("%d; %d", count[s.name], readyOf[s.name]))
			}
			tot := 0
			for _, v := range readyOf {
				tot += v
			}
			r = append(r, fmt.Sprintf("%d; %d", n, tot))
			if fleet != nil {
				r = append(r, fmt.Sprint(b.fleetCost.n), "")
			}
			return r
		}(),
		func() []string {
			r := []string{"start → its last Stack Ready"}
			var last time.Time
			for _, s := range shards {
				r = append(r, secs(lastOf[s.name].Sub(t0)))
				last = maxTime(last, lastOf[s.name])
			}
			r = append(r, secs(last.Sub(t0)))
			if fleet != nil {
				r = append(r, secs(b.fleetCost.wall), fmt.Sprintf("%.2f×", (last.Sub(t0).Seconds()/float64(n))/(b.fleetCost.wall.Seconds()/float64(b.fleetCost.n))))
			}
			return r
		}(),
		row("manager CPU (utime+stime)", func(c costs, k int) string {
			return fmt.Sprintf("%.1f s (%.0f ms/Stack)", c.cpu.Seconds(), float64(c.cpu.Milliseconds())/float64(max(1, k)))
		}, func(c costs) float64 { return c.cpu.Seconds() }),
		row("engine CPU (reaped children)", func(c costs, k int) string {
			return fmt.Sprintf("%.1f s (%s s/Stack)", c.engine.Seconds(), perStack(c.engine.Seconds(), k))
		}, func(c costs) float64 { return c.engine.Seconds() }),
		row("API requests (`rest_client_requests_total`)", func(c costs, k int) string {
			return fmt.Sprintf("%.0f (%s/Stack)", c.requests, perStack(c.requests, k))
		}, func(c costs) float64 { return c.requests }),
		row("… by method", func(c costs, _ int) string { return methods(c.methods) }, nil),
		row("reconciles: stack / update / program", func(c costs, k int) string {
			return fmt.Sprintf("%.0f / %.0f / %.0f (%s / %s / %s per Stack)", c.stackRec, c.upRec, c.progRec,
				perStack(c.stackRec, k), perStack(c.upRec, k), perStack(c.progRec, k))
		}, func(c costs) float64 { return c.stackRec + c.upRec + c.progRec }),
		row("peak RSS (sampled 1/s; a + b: the sum)", func(c costs, _ int) string { return MiB(c.rss) }, nil),
		row("VmHWM at the end", func(c costs, _ int) string { return MiB(c.hwm) }, nil),
	}
	out := table(header, rows)
	if fleet == nil {
		out += "\nThe fleet scenario did not run (or did not become Ready) in this run: no single-manager figures to compare with. " +
			"Run `BENCH_SCENARIOS=floor,fleet,shards` for them.\n"
	} else {
		out += "\nThe fleet scenario's figures are its manager's from just before the fleet's creation to the scenario's end " +
			"(its CPU profile included). The last column compares per-Stack figures: the fleets differ in size.\n"
	}
	return out
}
