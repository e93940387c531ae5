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
	m              *measurement
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

// shardsRun is one run of the shards scenario, filled in step by step.
type shardsRun struct {
	n      int
	names  []string
	of     map[string]string // Stack → its shard
	count  map[string]int    // shard → its Stacks
	shards []*shard
	// pidShard names the shard of a runner's pid.
	pidShard map[int]string
	data     string
	creation time.Duration
	ready    readiness
	// lastOf and readyOf are, per shard, its last Stack Ready and how many were.
	lastOf  map[string]time.Time
	readyOf map[string]int
	// deployed are the Updates of the deploy, by name.
	deployed map[string]bool
}

// runShards stops the scenarios' manager and runs a fleet on two managers sharded by
// label; then moves Stacks from one shard to the other. It runs last: the scenarios'
// manager is not started again.
func (b *bench) runShards(ctx context.Context) error {
	r := &shardsRun{n: b.cfg.ShardsN, names: numbered("shard", b.cfg.ShardsN), of: map[string]string{}, count: map[string]int{}}
	for i, name := range r.names {
		r.of[name] = shardOf(i)
		r.count[r.of[name]]++
	}
	b.say("shards: stopping the scenarios' manager (pid %d): the two shards take over", b.mgr.pid())
	if _, err := b.stopManagerOnPurpose(2 * time.Minute); err != nil {
		return fmt.Errorf("failed to stop the manager: %w", err)
	}
	var err error
	if r.data, err = shardData(b.work); err != nil {
		return fmt.Errorf("failed to prepare the shards' data directory: %w", err)
	}
	sctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	stop, err := b.startShards(sctx, fail, r)
	defer stop()
	if err != nil {
		return err
	}
	if err := b.deployShards(ctx, sctx, r); err != nil {
		return err
	}
	runRows, err := b.shardRunners(sctx, r)
	if err != nil {
		return err
	}
	mv, err := b.moveShard(sctx, r)
	if err != nil {
		return err
	}
	b.rep.add(fmt.Sprintf("Shards (N=%d over two managers)", r.n), b.shardsReport(r, runRows, mv))
	return nil
}

// startShards starts the two managers, each on its label selector and Lease, and waits
// until each leads and has started its Stack workers. A shard's manager that exits
// before stop fails sctx.
func (b *bench) startShards(sctx context.Context, fail context.CancelCauseFunc, r *shardsRun) (stop func(), err error) {
	var stopping atomic.Bool
	stop = func() {
		stopping.Store(true)
		for _, s := range r.shards {
			s.m.release()
			b.say("shards: stopping shard %s's manager (pid %d)", s.name, s.mgr.pid())
			if err := s.mgr.stop(2 * time.Minute); err != nil {
				b.say("shards: %v", err)
			}
		}
	}
	for _, sel := range shardSelectors {
		s := &shard{name: sel[0], selector: sel[1]}
		o := b.mgrOpts
		o.dataDir = r.data
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
			return stop, fmt.Errorf("failed to start shard %s's manager: %w", s.name, err)
		}
		s.m = &measurement{sampling: func() int64 { return 0 }}
		r.shards = append(r.shards, s)
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
	r.pidShard = map[int]string{}
	for _, s := range r.shards {
		err := pollUntil(sctx, 2*time.Minute, func() (bool, error) {
			_, _, workers, err := s.log.state()
			return !workers.IsZero(), err
		})
		if err != nil {
			return stop, fmt.Errorf("shard %s's Stack controller did not start within 2 minutes: %w", s.name, errors.Join(err, context.Cause(sctx)))
		}
		r.pidShard[s.mgr.pid()] = s.name
	}
	return stop, nil
}

// deployShards creates the fleet, every other Stack labelled for shard a, and waits until
// all are Ready, measuring each manager meanwhile.
func (b *bench) deployShards(ctx, sctx context.Context, r *shardsRun) error {
	for _, s := range r.shards {
		s.m = b.measureOf(sctx, s.mgr)
	}
	timeout := b.fleetTimeout(r.n, b.floorMedian())
	b.say("shards: creating %d Programs and Stacks, %d labelled a and %d b (timeout %s)", r.n, r.count["a"], r.count["b"], timeout.Round(time.Second))
	keys := keysOf(nsShards, r.names)
	start, creation, err := b.createFleet(sctx, keys, func(ns, name string) error {
		return b.createOwnStack(sctx, r.data, ns, name, map[string]string{shardLabel: r.of[name]})
	})
	r.creation = creation
	if err != nil {
		return errors.Join(err, context.Cause(sctx))
	}
	progress := func(ready int) {
		parts := []string{}
		for _, s := range r.shards {
			parts = append(parts, fmt.Sprintf("shard %s %s", s.name, procLine(s.mgr.pid())))
		}
		b.say("shards: %d/%d Ready after %s; Updates: %s; %s", ready, r.n, secs(time.Since(start)),
			mapString(b.track.phases(nsShards)), strings.Join(parts, "; "))
	}
	r.ready = b.waitReady(sctx, keys, "", start, timeout, progress)
	for _, s := range r.shards {
		s.m.end(sctx)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := context.Cause(sctx); err != nil {
		return err
	}
	r.lastOf, r.readyOf = map[string]time.Time{}, map[string]int{}
	for _, name := range r.names {
		if at, ok := b.track.readyAt(nsShards, name, ""); ok {
			r.lastOf[r.of[name]] = maxTime(r.lastOf[r.of[name]], at)
			r.readyOf[r.of[name]]++
		}
	}
	return nil
}

// shardRunners checks who ran the deploy's Updates: one per Stack, each by the manager of
// its Stack's shard (the pid in status.runner).
func (b *bench) shardRunners(ctx context.Context, r *shardsRun) ([][]string, error) {
	_, deployed, err := b.countUpdates(ctx, nsShards)
	if err != nil {
		return nil, err
	}
	r.deployed = map[string]bool{}
	perStack := map[string]int{}
	runBy := map[string]map[string]int{} // Stack's shard → runner's shard → Updates
	var wrong, unknown []string
	for _, u := range deployed {
		r.deployed[u.Name] = true
		st := u.Spec.StackName
		perStack[st]++
		who := "?"
		if pid, ok := runnerPID(u.Status.Runner); ok && r.pidShard[pid] != "" {
			who = r.pidShard[pid]
		}
		if runBy[r.of[st]] == nil {
			runBy[r.of[st]] = map[string]int{}
		}
		runBy[r.of[st]][who]++
		switch {
		case who == "?":
			unknown = append(unknown, fmt.Sprintf("%s (%q)", u.Name, u.Status.Runner))
		case who != r.of[st]:
			wrong = append(wrong, fmt.Sprintf("%s of %s (shard %s) run by shard %s", u.Name, st, r.of[st], who))
		}
	}
	counts := map[int]int{}
	var notOne []string
	for _, name := range r.names {
		counts[perStack[name]]++
		if perStack[name] != 1 && len(notOne) < 5 {
			notOne = append(notOne, fmt.Sprintf("%s (%d)", name, perStack[name]))
		}
	}
	rows := [][]string{
		{"**Updates per Stack** (must be 1: no Stack run by both)", countsString(counts) + exampleString(notOne)},
		{"**Updates run by the manager of the Stack's shard** (status.runner's pid)", fmt.Sprintf("%d of %d", len(deployed)-len(wrong)-len(unknown), len(deployed))},
		{"… Updates by Stack's shard → runner's shard", runByString(runBy)},
	}
	if len(wrong) > 0 {
		rows = append(rows, []string{"… run by the other shard", fmt.Sprintf("%d, e.g. %s", len(wrong), strings.Join(wrong[:min(3, len(wrong))], "; "))})
	}
	if len(unknown) > 0 {
		rows = append(rows, []string{"… runner not one of the two managers", fmt.Sprintf("%d, e.g. %s", len(unknown), strings.Join(unknown[:min(3, len(unknown))], "; "))})
	}
	return rows, nil
}

// shardMove is what moving Stacks from shard a to b did.
type shardMove struct {
	moved []string
	ready int
	revs  map[string]string
	rows  [][]string
}

// moveShard relabels shardsMoved Stacks of shard a for b and changes their Programs; each
// must get exactly one new Update, run by shard b, and no other Stack any.
func (b *bench) moveShard(ctx context.Context, r *shardsRun) (*shardMove, error) {
	var inA []string
	for _, name := range r.names {
		if r.of[name] == "a" {
			inA = append(inA, name)
		}
	}
	mv := &shardMove{moved: spread(inA, shardsMoved)}
	label := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"b"}}}`, shardLabel)
	b.say("shards: relabelling %d Stacks from shard a to b and changing their Programs", len(mv.moved))
	moveStart := time.Now()
	movedAt, revs, err := b.changePrograms(ctx, nsShards, mv.moved, "${message} (moved to shard b)", func(name string) error {
		st := &pulumiv1.Stack{}
		st.Namespace, st.Name = nsShards, name
		if err := b.cluster.client.Patch(ctx, st, client.RawPatch(types.MergePatchType, label)); err != nil {
			return fmt.Errorf("failed to relabel: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(err, context.Cause(ctx))
	}
	mv.revs = revs
	mv.ready = b.waitRevisions(ctx, nsShards, revs, 10*time.Minute, func(k int) {
		b.say("shards: %d/%d moved Stacks Ready at their new revision after %s", k, len(mv.moved), secs(time.Since(moveStart)))
	})
	if err := pause(ctx, shardsSettle); err != nil {
		return nil, errors.Join(err, context.Cause(ctx))
	}
	_, all, err := b.countUpdates(ctx, nsShards)
	if err != nil {
		return nil, err
	}
	mv.rows = b.moveRows(r, mv, all, movedAt, moveStart)
	return mv, nil
}

// moveRows reads what the move did from the Updates created since the deploy.
func (b *bench) moveRows(r *shardsRun, mv *shardMove, all []v1alpha1.Update, movedAt map[string]time.Time, moveStart time.Time) [][]string {
	isMoved := map[string]bool{}
	for _, name := range mv.moved {
		isMoved[name] = true
	}
	newPer := map[string][]v1alpha1.Update{}
	others := 0
	var otherEx []string
	for _, u := range all {
		switch {
		case r.deployed[u.Name]:
		case isMoved[u.Spec.StackName]:
			newPer[u.Spec.StackName] = append(newPer[u.Spec.StackName], u)
		default:
			others++
			if len(otherEx) < 3 {
				otherEx = append(otherEx, fmt.Sprintf("%s of %s (%s)", u.Name, u.Spec.StackName, u.Spec.Type))
			}
		}
	}
	var toReady, toRun []time.Duration
	exactlyOneByB := 0
	movedCounts := map[int]int{}
	var issues, touchedByA []string
	for _, name := range mv.moved {
		ups := newPer[name]
		movedCounts[len(ups)]++
		if len(ups) == 1 {
			if pid, _ := runnerPID(ups[0].Status.Runner); r.pidShard[pid] == "b" {
				exactlyOneByB++
			} else if len(issues) < 5 {
				issues = append(issues, fmt.Sprintf("%s run by %q", name, ups[0].Status.Runner))
			}
		} else if len(issues) < 5 {
			issues = append(issues, fmt.Sprintf("%s: %d new Updates", name, len(ups)))
		}
		if u, _, ok := b.firstUpdateSince(nsShards, name, moveStart); ok && !u.run.IsZero() {
			toRun = append(toRun, u.run.Sub(movedAt[name]))
		}
		if at, ok := b.track.readyAt(nsShards, name, mv.revs[name]); ok {
			toReady = append(toReady, at.Sub(movedAt[name]))
		}
		// Shard a logs a reconcile only of a Stack it still sees; one that left its
		// selector is NotFound in its cache and logs nothing. Allow a reconcile in flight.
		if at, ok := r.shards[0].log.lastAt(key(nsShards, name)); ok && at.After(movedAt[name].Add(2*time.Second)) {
			touchedByA = append(touchedByA, name)
		}
	}
	return [][]string{
		{"Stacks relabelled a → b, each then given a new Program content", fmt.Sprint(len(mv.moved))},
		{"Ready at the new revision", fmt.Sprintf("%d/%d", mv.ready, len(mv.moved))},
		{"**each got exactly one new Update, run by shard b's manager**", fmt.Sprintf("%d of %d%s", exactlyOneByB, len(mv.moved), exampleString(issues))},
		{"new Updates per moved Stack", countsString(movedCounts)},
		{"new Updates of Stacks not moved (should be 0)", fmt.Sprint(others) + exampleString(otherEx)},
		{"moved Stacks shard a still reconciled > 2 s after their relabel (log; should be 0)", fmt.Sprint(len(touchedByA)) + exampleString(touchedByA[:min(3, len(touchedByA))])},
		{"**relabel + change → Ready**: median / p99 / max (n)", pctRow(toReady)},
		{"relabel + change → runner start (Update seen Running): median / p99 / max (n)", pctRow(toRun)},
	}
}

// shardsReport renders the scenario's section.
func (b *bench) shardsReport(r *shardsRun, runRows [][]string, mv *shardMove) string {
	n := r.n
	rows := [][]string{
		{"Stacks (each with its own Program), labelled a / b", fmt.Sprintf("%d (%d / %d)", n, r.count["a"], r.count["b"])},
		{"creation of the 2N objects", secs(r.creation)},
		{"**start → all Ready**", r.ready.allReady()},
		{"Ready since start: p50 / p90 / p99 / max", percentiles(r.ready.sinceStart, 50, 90, 99, 100)},
	}
	rows = append(rows, b.idealRows("ideal: N × floor median (CLI first update) / parallelism of one manager (2 cores)", r.ready.wall, n, b.floorMedian())...)
	rows = append(rows, b.engineThroughputRows(r.ready.wall, n)...)
	rows = append(rows, runRows...)
	par := b.cfg.Parallelism
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
		table([]string{"shards", ""}, rows) + "\nPer manager:\n\n" + b.shardCostTable(r)
	if !r.ready.all() {
		body += "\n" + b.notReady(nsShards, r.names, "")
	}
	body += fmt.Sprintf("\nThen %d Stacks of shard a (spread over its names) are relabelled `%s=b` and their Programs "+
		"given a new `greeting` content (merge patches, one Stack after the other per client); times from each Stack's "+
		"relabel. New Updates are counted %s after the last moved Stack was Ready.\n\n", len(mv.moved), shardLabel, shardsSettle) +
		table([]string{"move", ""}, mv.rows)
	if mv.ready < len(mv.moved) {
		var late []string
		for _, name := range mv.moved {
			if _, ok := b.track.readyAt(nsShards, name, mv.revs[name]); !ok {
				late = append(late, name)
			}
		}
		body += "\n" + b.notReady(nsShards, late, "the new revision")
	}
	return body
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

// managerCosts is what one manager spent over a span, as the shards' table compares it.
type managerCosts struct {
	cpu, engine              time.Duration
	requests                 float64
	rss, hwm                 int64
	stackRec, upRec, progRec float64
	methods                  map[string]float64
}

func costsOf(before, after snapshot, peak int64) managerCosts {
	c := managerCosts{cpu: after.mgr.CPU - before.mgr.CPU, engine: after.mgr.ChildrenCPU - before.mgr.ChildrenCPU,
		rss: max(peak, after.mgr.RSS), hwm: after.mgr.HWM, methods: map[string]float64{}}
	if before.metricsErr == nil && after.metricsErr == nil {
		c.requests = after.metrics.Sum("rest_client_requests_total", nil) - before.metrics.Sum("rest_client_requests_total", nil)
		c.methods = DeltaBy(before.metrics, after.metrics, "rest_client_requests_total", "method")
		rec := DeltaBy(before.metrics, after.metrics, "controller_runtime_reconcile_total", "controller")
		c.stackRec, c.upRec, c.progRec = rec["stack"], rec["update"], rec["program-controller"]
	}
	return c
}

// add sums o into c: two managers on one machine spend the sum of their costs.
func (c *managerCosts) add(o managerCosts) {
	c.cpu += o.cpu
	c.engine += o.engine
	c.requests += o.requests
	c.rss += o.rss
	c.hwm += o.hwm
	c.stackRec += o.stackRec
	c.upRec += o.upRec
	c.progRec += o.progRec
	for k, v := range o.methods {
		c.methods[k] += v
	}
}

// shardCostTable compares the two managers, their sum and the fleet scenario's single
// manager (per Stack, when the fleet ran).
func (b *bench) shardCostTable(r *shardsRun) string {
	var cs []managerCosts
	sum := managerCosts{methods: map[string]float64{}}
	header := []string{""}
	for _, s := range r.shards {
		cs = append(cs, costsOf(s.m.before, s.m.after, s.m.peak))
		sum.add(cs[len(cs)-1])
		header = append(header, fmt.Sprintf("shard %s (`%s`)", s.name, s.selector))
	}
	header = append(header, "a + b")
	fc := b.fleetCost
	var fleet managerCosts
	if fc != nil {
		fleet = costsOf(fc.before, fc.after, 0)
		header = append(header, fmt.Sprintf("fleet scenario, one manager (N=%d)", fc.n), "a + b per Stack / fleet per Stack")
	}
	perStack := func(v float64, stacks int) string { return fmt.Sprintf("%.2f", v/float64(max(1, stacks))) }
	row := func(name string, f func(c managerCosts, stacks int) string, cmp func(c managerCosts) float64) []string {
		out := []string{name}
		for i, c := range cs {
			out = append(out, f(c, r.count[r.shards[i].name]))
		}
		out = append(out, f(sum, r.n))
		if fc != nil {
			out = append(out, f(fleet, fc.n), "")
			if cmp != nil {
				out[len(out)-1] = fmt.Sprintf("%.2f×", (cmp(sum)/float64(r.n))/(cmp(fleet)/float64(fc.n)))
			}
		}
		return out
	}
	rows := [][]string{
		b.shardReadyRow(r),
		b.shardLastReadyRow(r),
		row("manager CPU (utime+stime)", func(c managerCosts, k int) string {
			return fmt.Sprintf("%.1f s (%.0f ms/Stack)", c.cpu.Seconds(), float64(c.cpu.Milliseconds())/float64(max(1, k)))
		}, func(c managerCosts) float64 { return c.cpu.Seconds() }),
		row("engine CPU (reaped children)", func(c managerCosts, k int) string {
			return fmt.Sprintf("%.1f s (%s s/Stack)", c.engine.Seconds(), perStack(c.engine.Seconds(), k))
		}, func(c managerCosts) float64 { return c.engine.Seconds() }),
		row("API requests (`rest_client_requests_total`)", func(c managerCosts, k int) string {
			return fmt.Sprintf("%.0f (%s/Stack)", c.requests, perStack(c.requests, k))
		}, func(c managerCosts) float64 { return c.requests }),
		row("… by method", func(c managerCosts, _ int) string { return deltaString(c.methods) }, nil),
		row("reconciles: stack / update / program", func(c managerCosts, k int) string {
			return fmt.Sprintf("%.0f / %.0f / %.0f (%s / %s / %s per Stack)", c.stackRec, c.upRec, c.progRec,
				perStack(c.stackRec, k), perStack(c.upRec, k), perStack(c.progRec, k))
		}, func(c managerCosts) float64 { return c.stackRec + c.upRec + c.progRec }),
		row("peak RSS (sampled 1/s; a + b: the sum)", func(c managerCosts, _ int) string { return MiB(c.rss) }, nil),
		row("VmHWM at the end", func(c managerCosts, _ int) string { return MiB(c.hwm) }, nil),
	}
	out := table(header, rows)
	if fc == nil {
		return out + "\nThe fleet scenario did not run (or did not become Ready) in this run: no single-manager figures to compare with. " +
			"Run `BENCH_SCENARIOS=floor,fleet,shards` for them.\n"
	}
	return out + "\nThe fleet scenario's figures are its manager's from just before the fleet's creation to the scenario's end " +
		"(its CPU profile included). The last column compares per-Stack figures: the fleets differ in size.\n"
}

func (b *bench) shardReadyRow(r *shardsRun) []string {
	out := []string{"Stacks; Ready"}
	for _, s := range r.shards {
		out = append(out, fmt.Sprintf("%d; %d", r.count[s.name], r.readyOf[s.name]))
	}
	out = append(out, fmt.Sprintf("%d; %d", r.n, r.ready.ready))
	if b.fleetCost != nil {
		out = append(out, fmt.Sprint(b.fleetCost.n), "")
	}
	return out
}

func (b *bench) shardLastReadyRow(r *shardsRun) []string {
	out := []string{"start → its last Stack Ready"}
	t0 := r.ready.start
	var last time.Time
	for _, s := range r.shards {
		out = append(out, secs(r.lastOf[s.name].Sub(t0)))
		last = maxTime(last, r.lastOf[s.name])
	}
	out = append(out, secs(last.Sub(t0)))
	if fc := b.fleetCost; fc != nil {
		out = append(out, secs(fc.wall), fmt.Sprintf("%.2f×", (last.Sub(t0).Seconds()/float64(r.n))/(fc.wall.Seconds()/float64(fc.n))))
	}
	return out
}
