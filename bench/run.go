package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/procfs"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// Scenarios, in the order they run.
const (
	ScenarioFloor     = "floor"
	ScenarioLatency   = "latency"
	ScenarioFleet     = "fleet"
	ScenarioResync    = "resync"
	ScenarioIdle      = "idle"
	ScenarioRestart   = "restart"
	ScenarioDrift     = "drift"
	ScenarioGit       = "git"
	ScenarioFaulty    = "faulty"
	ScenarioRollout   = "rollout"
	ScenarioTemplates = "templates"
	ScenarioSecrets   = "secrets"
	ScenarioShards    = "shards"
)

// AllScenarios is every scenario in running order.
var AllScenarios = []string{ScenarioFloor, ScenarioLatency, ScenarioFleet, ScenarioResync, ScenarioIdle, ScenarioRestart, ScenarioDrift, ScenarioGit, ScenarioFaulty, ScenarioRollout, ScenarioTemplates, ScenarioSecrets, ScenarioShards}

// DefaultScenarios run when none are named: all but drift, whose settling and window would
// more than double a run, faulty, a second fleet, templates, two more, and rollout, a
// fleet deployed and then updated again in waves, restart, which stops and starts the
// manager, and shards, which replaces it with two.
var DefaultScenarios = []string{ScenarioFloor, ScenarioLatency, ScenarioFleet, ScenarioResync, ScenarioIdle, ScenarioGit}

// Where the fleet's Stacks keep their state (BENCH_FLEET_BACKEND).
const (
	FleetBackendNamespace = "namespace"
	FleetBackendStack     = "stack"
)

// Namespaces of the scenarios.
const (
	nsLatency = "bench-latency"
	nsFleet   = "bench-fleet"
	nsGit     = "bench-git"
	nsFaulty  = "bench-faulty"
	// nsPlatform holds the templates scenario's Program and its instances' Stacks; the
	// instances (and the plain arm's Stacks) spread over templateTenants namespaces.
	nsPlatform = "bench-platform"
)

// Config is one run of the harness.
type Config struct {
	// Root is the checkout; Bin (./bin), CRDs and Results default to paths inside it.
	Root, Bin, CRDs, Results string
	// Manager is bin/stackwright as `make build` builds it.
	Manager string
	// Scenarios to run (DefaultScenarios when empty). idle and drift need fleet.
	Scenarios []string
	// N is the fleet size; GitN the git fleet's (N when 0).
	N, GitN int
	// FloorRuns is how many runs each floor batch has; LatencyRuns how many apply→Ready.
	FloorRuns, LatencyRuns int
	// Parallelism is --max-concurrent-updates and the parallel floor's.
	Parallelism int
	// Idle is how long the idle phase watches the Ready fleet.
	Idle time.Duration
	// DriftN is how many fleet Stacks get a drift schedule (capped at N), DriftCron their
	// cron and DriftWindow how long the checks are counted.
	DriftN      int
	DriftCron   string
	DriftWindow time.Duration
	// ProfileSeconds is the length of the CPU profile taken during the fleet.
	ProfileSeconds int
	// FleetTimeout bounds the wait for the fleet (0: 4 × the ideal time, at least 5 s a run, + 5 min).
	FleetTimeout time.Duration
	// CreateWorkers create the fleet's objects concurrently.
	CreateWorkers int
	// GitResync is the git Stacks' resyncFrequencySeconds (0: the product's default).
	GitResync int64
	// GitSettle is how long the git fleet is left alone before the manager's RSS is read,
	// once all are Ready on the first commit (its idle figure) and again on the second.
	GitSettle time.Duration
	// SecretsN is how many unrelated Secrets the secrets scenario creates.
	SecretsN int
	// RolloutN is the rollout scenario's Stacks (N when 0), RolloutBake its StackRollout's
	// bakeTime.
	RolloutN    int
	RolloutBake time.Duration
	// Program is the program's shape (ProgramShapes) of the floors, latency, fleet, faulty
	// and shards scenarios.
	Program string
	// FleetBackend is where the fleet's and the shards' Stacks keep their state: "namespace" (the
	// namespace's default file:// backend, shared) or "stack" (a file:// backend of its
	// own, under the namespace's state directory).
	FleetBackend string
	// RestartChanges is how many fleet Stacks the restart scenario changes after the start.
	RestartChanges int
	// ShardsN is the shards scenario's fleet, split over its two managers.
	ShardsN int
	// RunnerDeadline is the manager's --runner-deadline: the faulty fleet's hanging Stacks
	// hold a worker that long per attempt.
	RunnerDeadline time.Duration
	// ManagerArgs are extra flags for the manager.
	ManagerArgs []string
	// KeepWork keeps the temporary work directory (data dir, backends, files).
	KeepWork bool
	// Out receives progress and the tables.
	Out io.Writer
}

// defaults fills in what the caller left zero and refuses what cannot run, before
// anything starts.
func (c *Config) defaults() error {
	if err := c.pathDefaults(); err != nil {
		return err
	}
	if len(c.Scenarios) == 0 {
		c.Scenarios = DefaultScenarios
	}
	if err := c.checkScenarios(); err != nil {
		return err
	}
	if c.Program == "" {
		c.Program = ProgramFiles
	}
	if !slices.Contains(ProgramShapes, c.Program) {
		return fmt.Errorf("unknown program %q: want one of %v", c.Program, ProgramShapes)
	}
	if c.FleetBackend == "" {
		c.FleetBackend = FleetBackendNamespace
	}
	if c.FleetBackend != FleetBackendNamespace && c.FleetBackend != FleetBackendStack {
		return fmt.Errorf("unknown fleet backend %q: want %s or %s", c.FleetBackend, FleetBackendNamespace, FleetBackendStack)
	}
	c.sizeDefaults()
	if c.has(ScenarioShards) && c.ShardsN < 2 {
		return errors.New("the shards scenario needs at least 2 Stacks (one per shard)")
	}
	if c.has(ScenarioRollout) && (c.RolloutN < len(rolloutSteps) || c.RolloutBake < 0) {
		return fmt.Errorf("the rollout scenario needs at least %d Stacks (one per ring) and a bake time not negative", len(rolloutSteps))
	}
	if c.N < 1 || c.FloorRuns < 1 || c.LatencyRuns < 1 || c.Parallelism < 1 || c.CreateWorkers < 1 {
		return errors.New("n, floor runs, latency runs, parallelism and create workers must be at least 1")
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	return nil
}

// pathDefaults makes the paths absolute, inside the checkout unless given.
func (c *Config) pathDefaults() error {
	if c.Root == "" {
		r, err := repo.Root()
		if err != nil {
			return err
		}
		c.Root = r
	}
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.Bin, filepath.Join(c.Root, "bin"))
	def(&c.CRDs, filepath.Join(c.Root, "config", "crd", "bases"))
	def(&c.Results, filepath.Join(c.Root, "bench", "results"))
	def(&c.Manager, filepath.Join(c.Bin, "stackwright"))
	for _, p := range []*string{&c.Bin, &c.CRDs, &c.Results, &c.Manager} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	return nil
}

// checkScenarios refuses unknown scenarios and those named without the fleet they need.
func (c *Config) checkScenarios() error {
	for _, s := range c.Scenarios {
		if !slices.Contains(AllScenarios, s) {
			return fmt.Errorf("unknown scenario %q (known: %s)", s, strings.Join(AllScenarios, ","))
		}
	}
	for _, need := range []struct{ scenario, why string }{
		{ScenarioIdle, "scenario idle watches the fleet: add fleet"},
		{ScenarioResync, "scenario resync re-runs the fleet: add fleet"},
		{ScenarioRestart, "scenario restart restarts the manager of the fleet: add fleet"},
		{ScenarioDrift, "scenario drift schedules checks on the fleet: add fleet"},
	} {
		if c.has(need.scenario) && !c.has(ScenarioFleet) {
			return errors.New(need.why)
		}
	}
	if !c.has(ScenarioDrift) {
		return nil
	}
	// Refused here rather than after the fleet has been built.
	if _, err := (&pulumiv1.DriftSchedule{Cron: c.DriftCron}).Parse(); err != nil {
		return fmt.Errorf("failed to parse the drift cron: %w", err)
	}
	if c.DriftN < 1 || c.DriftWindow <= 0 {
		return errors.New("drift n must be at least 1 and the drift window positive")
	}
	c.DriftN = min(c.DriftN, c.N)
	return nil
}

// sizeDefaults sizes what the caller left zero.
func (c *Config) sizeDefaults() {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&c.RestartChanges, 20)
	def(&c.ShardsN, 2000)
	def(&c.GitN, c.N)
	def(&c.SecretsN, 10000)
	def(&c.RolloutN, c.N)
	if c.GitSettle <= 0 {
		c.GitSettle = 2 * time.Minute
	}
	if c.RunnerDeadline <= 0 {
		c.RunnerDeadline = 15 * time.Second
	}
}

func (c *Config) has(s string) bool { return slices.Contains(c.Scenarios, s) }

// bench is the state of one run.
type bench struct {
	cfg     Config
	work    string
	cluster *cluster
	// mgr is the manager the scenarios run against, started with mgrOpts; restart and
	// shards stop it on purpose (mgrPaused is open meanwhile), and restart replaces it.
	mgr       *managerProc
	mgrOpts   managerOptions
	mgrMu     sync.Mutex
	mgrPaused chan struct{}
	track     *tracker
	rep       *report
	prefix    string
	// Results of earlier scenarios that later ones compare with.
	floor      *floorResult
	fleetReady bool
	fleetNames []string
	// fleetWall is the all-good fleet's start → all Ready (0: not reached).
	fleetWall time.Duration
	// fleetCost is the manager's cost over the fleet scenario (nil: not run or not Ready).
	fleetCost *fleetCost
}

// Run runs the configured scenarios and writes the results file. Everything it starts is
// stopped before it returns (manager, then API server, then etcd), also on error or when
// ctx is cancelled.
func Run(ctx context.Context, cfg Config) (err error) {
	if err := cfg.defaults(); err != nil {
		return err
	}
	if err := cfg.requireTools(); err != nil {
		return err
	}
	// The harness's own watches log only errors (the manager's log is its own file).
	logf.SetLogger(zap.New(zap.WriteTo(cfg.Out), zap.Level(zapcore.ErrorLevel)))
	b := &bench{cfg: cfg}
	started := time.Now()
	b.prefix = resultsPrefix(cfg.Results, started, cfg.N)
	if b.work, err = os.MkdirTemp("", "stackwright-bench-"); err != nil {
		return err
	}
	defer b.removeWork()
	b.say("work directory %s; results %s.md", b.work, b.prefix)
	b.say("starting control plane from %s", cfg.Bin)
	if b.cluster, err = startCluster(cfg.Bin, cfg.CRDs, b.work); err != nil {
		return err
	}
	defer func() {
		b.say("stopping control plane")
		if serr := b.cluster.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := b.startScenariosManager(ctx); err != nil {
		return err
	}
	defer func() {
		b.say("stopping manager (pid %d)", b.mgr.pid())
		if serr := b.mgr.stop(2 * time.Minute); serr != nil && err == nil {
			err = serr
		}
	}()
	ctx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	go b.failOnManagerExit(ctx, cancelRun)
	if err := b.startTracking(ctx); err != nil {
		return err
	}
	eng, err := newFloorEnv(cfg.Bin, filepath.Join(b.work, "floor"), cfg.Program)
	if err != nil {
		return err
	}
	b.rep = &report{path: b.prefix + ".md", out: cfg.Out, header: b.header(started, describeMachine(cfg.Root), eng.eng.Version())}
	if err := b.rep.writeLocked(); err != nil {
		return err
	}
	if err := b.runScenarios(ctx, eng); err != nil {
		return err
	}
	b.rep.add("Run", table([]string{"", ""}, [][]string{
		{"total wall time", secs(time.Since(started))},
		{"load average at the end (1, 5, 15 min)", loadAvg()},
		{"manager log", filepath.Base(b.prefix) + ".manager.log"},
	}))
	b.say("results written to %s.md", b.prefix)
	return nil
}

// requireTools checks the binaries a run needs before anything starts, and makes the
// results directory.
func (c *Config) requireTools() error {
	for _, b := range []string{"kube-apiserver", "etcd", "pulumi", "pulumi-language-yaml", "pulumi-resource-stackwright-testing"} {
		if err := repo.RequireBinaries(c.Bin, b); err != nil {
			return err
		}
	}
	if err := repo.RequireBinaries(filepath.Dir(c.Manager), filepath.Base(c.Manager)); err != nil {
		return fmt.Errorf("%w (and `make build` for %s)", err, c.Manager)
	}
	return os.MkdirAll(c.Results, 0o755)
}

func (b *bench) removeWork() {
	if b.cfg.KeepWork {
		fmt.Fprintf(b.cfg.Out, "bench: work directory kept: %s\n", b.work)
		return
	}
	_ = os.RemoveAll(b.work)
}

// startScenariosManager starts the manager every scenario runs against.
func (b *bench) startScenariosManager(ctx context.Context) error {
	extra := []string{"--runner-deadline", b.cfg.RunnerDeadline.String()}
	if b.cfg.has(ScenarioTemplates) {
		// Only then: serving templates adds controllers and a tenant lookup per queued
		// Update, which the other scenarios' figures were never measured with.
		extra = append(extra, "--template-api-groups="+templateGroup)
	}
	b.say("starting manager %s (log %s.manager.log)", b.cfg.Manager, b.prefix)
	b.mgrOpts = managerOptions{
		binary:     b.cfg.Manager,
		pulumiBin:  b.cfg.Bin,
		dataDir:    filepath.Join(b.work, "data"),
		kubeconfig: b.cluster.kubeconfig,
		logPath:    b.prefix + ".manager.log",
		parallel:   b.cfg.Parallelism,
		extra:      append(extra, b.cfg.ManagerArgs...),
	}
	var err error
	b.mgr, err = startManager(ctx, b.mgrOpts)
	return err
}

// failOnManagerExit cancels the run should the manager die, so that every scenario stops
// waiting for it; a manager stopped on purpose is waited for (restart starts another).
func (b *bench) failOnManagerExit(ctx context.Context, cancelRun context.CancelCauseFunc) {
	for {
		m := b.manager()
		select {
		case <-m.done:
		case <-ctx.Done():
			return
		}
		if next := b.awaitReplacement(m); next != nil {
			select {
			case <-next:
				continue
			case <-ctx.Done():
				return
			}
		}
		cancelRun(fmt.Errorf("manager exited unexpectedly (%w); see %s:\n%s",
			m.exitErr(), m.logPath, tailFile(m.logPath, 3000)))
		return
	}
}

// startTracking creates the scenarios' namespaces and starts the tracker on them, until
// ctx ends.
func (b *bench) startTracking(ctx context.Context) error {
	watched := []string{nsLatency, nsFleet, nsGit, nsFaulty}
	if b.cfg.has(ScenarioTemplates) {
		watched = append(append(watched, nsPlatform), tenantNamespaces()...)
	}
	for s, ns := range map[string]string{ScenarioSecrets: nsSecrets, ScenarioRollout: nsRollout, ScenarioShards: nsShards} {
		if b.cfg.has(s) {
			watched = append(watched, ns)
		}
	}
	for _, ns := range watched {
		if err := b.cluster.client.Create(ctx, namespace(ns)); err != nil {
			return fmt.Errorf("failed to create namespace %s: %w", ns, err)
		}
	}
	var err error
	b.track, err = startTracker(ctx, b.cluster.cfg, b.cluster.scheme, watched...)
	return err
}

// runScenarios runs the configured scenarios in order; a failed one is reported and ends
// the run.
func (b *bench) runScenarios(ctx context.Context, eng *floorEnv) error {
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{ScenarioFloor, func(ctx context.Context) error { return b.runFloor(ctx, eng) }},
		{ScenarioLatency, b.runLatency},
		{ScenarioFleet, b.runFleetMeasured},
		{ScenarioResync, b.runResync},
		{ScenarioIdle, b.runIdle},
		{ScenarioRestart, b.runRestart},
		{ScenarioDrift, b.runDrift},
		{ScenarioGit, b.runGit},
		{ScenarioFaulty, b.runFaulty},
		{ScenarioRollout, b.runRollout},
		{ScenarioTemplates, b.runTemplates},
		{ScenarioSecrets, b.runSecrets},
		{ScenarioShards, b.runShards},
	}
	for _, s := range steps {
		if !b.cfg.has(s.name) {
			continue
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		b.say("scenario %s", s.name)
		if err := s.run(ctx); err != nil {
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			b.rep.add(s.name+" (failed)", "The scenario failed: "+err.Error())
			return fmt.Errorf("scenario %s: %w", s.name, err)
		}
	}
	return nil
}

func (b *bench) say(format string, args ...any) {
	fmt.Fprintf(b.cfg.Out, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (b *bench) header(started time.Time, m machine, pulumi string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "# Stackwright benchmark, %s, N=%d\n\n", started.Format("2006-01-02 15:04 MST"), b.cfg.N)
	s.WriteString("Generated by `make bench` (bench/cmd/fleet). The harness reports; it does not judge. " +
		"Percentiles are nearest-rank. Ratios compare figures of this run only.\n\n")
	s.WriteString(table([]string{"machine", ""}, [][]string{
		{"CPU", m.CPU},
		{"cores", fmt.Sprint(m.Cores)},
		{"memory", m.Memory},
		{"kernel", m.Kernel},
		{"load average at start (1, 5, 15 min)", m.Load},
		{"go", m.Go},
		{"pulumi", pulumi},
		{"kube-apiserver", b.cluster.version},
		{"commit", m.Commit},
	}))
	s.WriteString("\n")
	rows := [][]string{
		{"scenarios", strings.Join(b.cfg.Scenarios, ",")},
		{"N (fleet)", fmt.Sprint(b.cfg.N)},
		{"N (git fleet)", fmt.Sprint(b.cfg.GitN)},
		{"floor runs per batch", fmt.Sprint(b.cfg.FloorRuns)},
		{"latency runs", fmt.Sprint(b.cfg.LatencyRuns)},
		{"idle", b.cfg.Idle.String()},
		{"manager --runner-deadline", b.cfg.RunnerDeadline.String()},
	}
	if b.cfg.has(ScenarioDrift) {
		rows = append(rows, []string{"drift", fmt.Sprintf("%d Stacks, `%s`, window %s", b.cfg.DriftN, b.cfg.DriftCron, b.cfg.DriftWindow)})
	}
	rows = append(rows,
		[]string{"manager", "`" + filepath.Base(b.cfg.Manager) + " " + strings.Join(redactArgs(b.mgr.args, b.work), " ") + "`"},
		[]string{"program", programDescription(b.cfg.Program) + ", one Program per Stack (faulty, rollout and templates: 3 resources, see their sections)"},
		[]string{"fleet and shards state", map[string]string{
			FleetBackendNamespace: "the namespace's file:// backend, shared by its Stacks",
			FleetBackendStack:     "a file:// backend per Stack, under the namespace's state directory",
		}[b.cfg.FleetBackend]},
	)
	s.WriteString(table([]string{"run", ""}, rows))
	return s.String()
}

// redactArgs shortens the temporary work directory in args to $WORK.
func redactArgs(args []string, work string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, work, "$WORK")
	}
	return out
}

// snapshot is the cost so far of the manager and the control plane.
type snapshot struct {
	at                  time.Time
	mgr, apiserver, etc procfs.Stat
	metrics             Metrics
	metricsErr          error
}

func (b *bench) snap(ctx context.Context) snapshot {
	return b.snapOf(ctx, b.manager())
}

// countUpdates lists the Updates of ns by phase.
func (b *bench) countUpdates(ctx context.Context, ns string) (map[v1alpha1.UpdatePhase]int, []v1alpha1.Update, error) {
	var list v1alpha1.UpdateList
	if err := b.cluster.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, nil, fmt.Errorf("failed to list Updates: %w", err)
	}
	out := map[v1alpha1.UpdatePhase]int{}
	for _, u := range list.Items {
		p := u.Status.Phase
		if p == "" {
			p = v1alpha1.UpdatePhasePending
		}
		out[p]++
	}
	return out, list.Items, nil
}

// costRows are the rows that compare two snapshots: CPU of the manager, its engine runs,
// the API server and etcd, and the manager's API requests.
func costRows(before, after snapshot) [][]string {
	d := after.at.Sub(before.at)
	cpu := func(a, b time.Duration) string {
		return fmt.Sprintf("%.2f s (%.1f%% of one core)", (a - b).Seconds(), 100*(a-b).Seconds()/d.Seconds())
	}
	rows := [][]string{
		{"manager CPU (utime+stime)", cpu(after.mgr.CPU, before.mgr.CPU)},
		{"engine CPU (manager's reaped children: pulumi, YAML host, provider)", cpu(after.mgr.ChildrenCPU, before.mgr.ChildrenCPU)},
	}
	if after.apiserver.PID != 0 {
		rows = append(rows, []string{"kube-apiserver CPU", cpu(after.apiserver.CPU, before.apiserver.CPU)})
	}
	if after.etc.PID != 0 {
		rows = append(rows, []string{"etcd CPU", cpu(after.etc.CPU, before.etc.CPU)})
	}
	rows = append(rows,
		[]string{"manager RSS at the end (VmRSS)", MiB(after.mgr.RSS)},
		[]string{"manager peak RSS so far (VmHWM)", MiB(after.mgr.HWM)},
	)
	if before.metricsErr != nil || after.metricsErr != nil {
		rows = append(rows, []string{"manager API requests", fmt.Sprintf("metrics unavailable: %v %v", before.metricsErr, after.metricsErr)})
		return rows
	}
	reqs := after.metrics.Sum("rest_client_requests_total", nil) - before.metrics.Sum("rest_client_requests_total", nil)
	rows = append(rows, []string{"manager API requests (rest_client_requests_total)",
		fmt.Sprintf("%.0f (%.2f/s)", reqs, reqs/d.Seconds())})
	delta := func(metric, label string) map[string]float64 {
		return DeltaBy(before.metrics, after.metrics, metric, label)
	}
	rows = append(rows,
		[]string{"… by method", deltaString(delta("rest_client_requests_total", "method"))},
		[]string{"… by code", deltaString(delta("rest_client_requests_total", "code"))},
		[]string{"reconciles by controller", deltaString(delta("controller_runtime_reconcile_total", "controller"))},
	)
	if errs := delta("controller_runtime_reconcile_errors_total", "controller"); len(errs) > 0 {
		rows = append(rows, []string{"reconcile errors by controller", deltaString(errs)})
	}
	return rows
}

func orNone(parts []string) string {
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// ownBackend is spec.backend of Stack name in namespace ns served by the manager whose data
// directory is dataDir: with BENCH_FLEET_BACKEND=stack a file:// backend of its own inside
// the namespace's state directory, else "" (the namespace's shared one).
func (b *bench) ownBackend(dataDir, ns, name string) string {
	if b.cfg.FleetBackend != FleetBackendStack {
		return ""
	}
	return "file://" + filepath.Join(dataDir, "state", ns, "stacks", name)
}
