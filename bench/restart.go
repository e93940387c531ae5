package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// The restart scenario: the Ready fleet's manager stopped with SIGTERM (what a rollout of
// its Deployment does) and started again with the same data directory and flags. What the
// new process costs until it has looked at every Stack again, whether it starts any engine
// run for that, and how soon it serves a real change made while it catches up.
const (
	// restartChangeDelay is when, after the new process started, the changes are made.
	restartChangeDelay = 5 * time.Second
	// restartSettle is how long the harness keeps counting Updates once every Stack was
	// reconciled and every changed Stack is Ready.
	restartSettle = 30 * time.Second
	// restartLogPoll is how often the new manager's log is read.
	restartLogPoll = 100 * time.Millisecond
	// restartScrape is how often its metrics are scraped (a scrape of a fleet's per-Stack
	// series costs the manager a little CPU: not more often).
	restartScrape = time.Second
	// restartGoal is the goal for a change's runner start after a restart, at p99.
	restartGoal = 10 * time.Second
)

// manager returns the manager the scenarios run against now.
func (b *bench) manager() *managerProc {
	b.mgrMu.Lock()
	defer b.mgrMu.Unlock()
	return b.mgr
}

// awaitReplacement tells the watch for an unexpected exit of m whether m was stopped on
// purpose: nil if not; else a channel closed once its replacement runs (never, if none is
// started: the scenario that stopped it reports why).
func (b *bench) awaitReplacement(m *managerProc) <-chan struct{} {
	b.mgrMu.Lock()
	defer b.mgrMu.Unlock()
	if b.mgr != m {
		done := make(chan struct{})
		close(done)
		return done
	}
	return b.mgrPaused
}

// stopManagerOnPurpose stops the scenarios' manager with SIGTERM and waits for it to exit;
// the run carries on without it until startManagerAgain. It returns how long the exit took.
func (b *bench) stopManagerOnPurpose(timeout time.Duration) (time.Duration, error) {
	b.mgrMu.Lock()
	old := b.mgr
	if b.mgrPaused == nil {
		b.mgrPaused = make(chan struct{})
	}
	b.mgrMu.Unlock()
	t0 := time.Now()
	err := old.stop(timeout)
	return time.Since(t0), err
}

// startManagerAgain starts the manager with the first one's options (data directory,
// flags) but a log of its own, and makes it the scenarios' manager.
func (b *bench) startManagerAgain(ctx context.Context, logPath string) error {
	o := b.mgrOpts
	o.logPath = logPath
	m, err := startManager(ctx, o)
	if err != nil {
		return err
	}
	b.mgrMu.Lock()
	b.mgr = m
	if b.mgrPaused != nil {
		close(b.mgrPaused)
		b.mgrPaused = nil
	}
	b.mgrMu.Unlock()
	return nil
}

// logLine is what the harness reads of one line of the manager's JSON log.
type logLine struct {
	Msg        string `json:"msg"`
	Controller string `json:"controller"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
}

// parseLogLine reads a line of the manager's log (zap's JSON encoder); ok is false for
// anything else.
func parseLogLine(line []byte) (l logLine, ok bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return l, false
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return l, false
	}
	return l, true
}

// logWatch tails a manager's log and records when the harness first read each Stack's
// "Reconciled Stack" line (the Stack controller logs one at the end of every reconcile)
// and the Stack controller's "Starting workers" (its caches synced).
type logWatch struct {
	mu sync.Mutex
	// first and last are when the first and the last reconcile line of each Stack
	// (namespace/name) were read.
	first, last map[string]time.Time
	// lines counts the reconcile lines read.
	lines int
	// workers is when the Stack controller's workers were seen starting.
	workers time.Time
	err     error
}

// tailLog reads the log at path every interval until ctx ends.
func tailLog(ctx context.Context, path string, interval time.Duration) *logWatch {
	w := &logWatch{first: map[string]time.Time{}, last: map[string]time.Time{}}
	go func() {
		f, err := os.Open(path)
		if err != nil {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			return
		}
		defer f.Close()
		var pending []byte
		buf := make([]byte, 256<<10)
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			for {
				n, err := f.Read(buf)
				pending = append(pending, buf[:n]...)
				if n == 0 || err != nil {
					if err != nil && err != io.EOF {
						w.mu.Lock()
						w.err = err
						w.mu.Unlock()
						return
					}
					break
				}
			}
			if i := bytes.LastIndexByte(pending, '\n'); i >= 0 {
				w.consume(pending[:i+1], time.Now())
				pending = append(pending[:0], pending[i+1:]...)
			}
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	return w
}

// consume records the complete lines of chunk, read at now.
func (w *logWatch) consume(chunk []byte, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for line := range bytes.SplitSeq(chunk, []byte{'\n'}) {
		// Cheap filter first: most lines are of no interest.
		if !bytes.Contains(line, []byte(`"controller":"stack"`)) {
			continue
		}
		l, ok := parseLogLine(line)
		if !ok || l.Controller != "stack" {
			continue
		}
		switch l.Msg {
		case "Reconciled Stack":
			w.lines++
			k := key(l.Namespace, l.Name)
			if _, seen := w.first[k]; !seen {
				w.first[k] = now
			}
			w.last[k] = now
		case "Starting workers":
			if w.workers.IsZero() {
				w.workers = now
			}
		}
	}
}

// lastAt returns when the last reconcile line of Stack k was read.
func (w *logWatch) lastAt(k string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.last[k]
	return at, ok
}

// state returns a copy of what was read so far.
func (w *logWatch) state() (first map[string]time.Time, lines int, workers time.Time, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	first = make(map[string]time.Time, len(w.first))
	for k, v := range w.first {
		first[k] = v
	}
	return first, w.lines, w.workers, w.err
}

// queueSample is one scrape of the Stack controller's counters.
type queueSample struct {
	at time.Time
	// reconciles is controller_runtime_reconcile_total{controller="stack"}, depth the
	// stack queue's workqueue_depth (every priority), active its busy workers.
	reconciles, depth, active float64
}

// scrapeQueue samples the manager's Stack controller every interval until ctx ends; the
// returned function stops it and returns the samples.
func scrapeQueue(ctx context.Context, url string, interval time.Duration) (stop func() []queueSample) {
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg  sync.WaitGroup
		out []queueSample
	)
	wg.Go(func() {
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			m, err := Scrape(sctx, url)
			scancel()
			if err == nil {
				out = append(out, queueSample{at: time.Now(),
					reconciles: m.Sum("controller_runtime_reconcile_total", map[string]string{"controller": "stack"}),
					depth:      m.Sum("workqueue_depth", map[string]string{"name": "stack"}),
					active:     m.Sum("controller_runtime_active_workers", map[string]string{"controller": "stack"}),
				})
			}
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	})
	return sync.OnceValue(func() []queueSample {
		cancel()
		wg.Wait()
		return out
	})
}

// queueDrained returns the first sample at which the Stack controller had finished n
// reconciles, and the first sample from then on with its queue empty and no worker busy
// (zero times: not seen).
func queueDrained(samples []queueSample, n int) (reached, drained time.Time) {
	for _, s := range samples {
		if reached.IsZero() && s.reconciles >= float64(n) {
			reached = s.at
		}
		if !reached.IsZero() && s.depth == 0 && s.active == 0 {
			return reached, s.at
		}
	}
	return reached, time.Time{}
}

// spread picks k of names, evenly spaced (the middle of each k-th part), so that the
// changed Stacks are not all at one end of the manager's initial list.
func spread(names []string, k int) []string {
	k = min(k, len(names))
	out := make([]string, 0, k)
	for i := range k {
		out = append(out, names[(2*i+1)*len(names)/(2*k)])
	}
	return out
}

// changeRun is what the harness saw of one changed Stack's run.
type changeRun struct {
	// change is when its change was made; run and done when its Update was seen Running
	// and finished (zero: not seen).
	change, run, done time.Time
}

// dispatchLatencies are the changes' change → runner start less any wait for one of the
// par runner slots while the other changes held them all: the k-th run to start (in
// start order) needs k−par+1 of the earlier ones finished, so its slot was free at the
// (k−par+1)-th earliest end among them. What remains is the manager's own delay in
// starting a run it could have started. Runs not seen starting are left out.
func dispatchLatencies(runs []changeRun, par int) []time.Duration {
	started := slices.DeleteFunc(slices.Clone(runs), func(r changeRun) bool { return r.run.IsZero() })
	sort.Slice(started, func(i, j int) bool { return started[i].run.Before(started[j].run) })
	out := make([]time.Duration, 0, len(started))
	for k, r := range started {
		from := r.change
		if k >= par {
			var ends []time.Time
			for _, e := range started[:k] {
				if !e.done.IsZero() {
					ends = append(ends, e.done)
				}
			}
			slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
			if i := k - par; i < len(ends) {
				from = maxTime(from, ends[i])
			}
		}
		out = append(out, max(0, r.run.Sub(from)))
	}
	return out
}

// pctRow renders median / p99 / max of ds, saying when p99 is the max.
func pctRow(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	s := Summarize(ds)
	p99 := secs(s.P99)
	if len(ds) < 100 {
		p99 += " (= max: fewer than 100 samples)"
	}
	return fmt.Sprintf("%s / %s / %s (%d)", secs(s.P50), p99, secs(s.Max), len(ds))
}

// restartRun is one run of the restart scenario, filled in step by step.
type restartRun struct {
	n, total int
	changed  []string
	// stopAt is the SIGTERM, shutdown the old process's exit after it, start the new
	// process's exec and up its metrics endpoint answering.
	stopAt, start time.Time
	shutdown, up  time.Duration
	oldPID        int
	logPath       string
	log           *logWatch
	queue         func() []queueSample
	changeAt      map[string]time.Time
	revs          map[string]string
	firstChange   time.Time
	readyChanged  int
	// end is when Updates stopped being counted.
	end time.Time
	m   *measurement
}

// runRestart stops the manager of the Ready fleet, starts it again, changes a few Stacks'
// Programs 5 s later, and times the new process until it has reconciled every Stack and
// run the changes.
func (b *bench) runRestart(ctx context.Context) error {
	title := fmt.Sprintf("Restart (N=%d, %d changes %s after the start)", len(b.fleetNames), min(b.cfg.RestartChanges, len(b.fleetNames)), restartChangeDelay)
	if !b.fleetReady {
		b.rep.add(title, "Skipped: the fleet did not become Ready.\n")
		return nil
	}
	r := &restartRun{n: len(b.fleetNames), changed: spread(b.fleetNames, b.cfg.RestartChanges)}
	var stacks pulumiv1.StackList
	if err := b.cluster.client.List(ctx, &stacks); err != nil {
		return fmt.Errorf("failed to list Stacks: %w", err)
	}
	r.total = len(stacks.Items)
	pre := b.snap(ctx)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := b.restartManager(ctx, wctx, r); err != nil {
		return err
	}
	defer r.queue()
	defer r.m.release()
	if err := b.changeWhileCatchingUp(ctx, r); err != nil {
		return err
	}
	if err := b.waitCaughtUp(ctx, r); err != nil {
		return err
	}
	r.end = time.Now()
	r.m.end(ctx)
	// The new process's whole life so far: its counters started at zero.
	r.m.before = snapshot{at: r.start, apiserver: pre.apiserver, etc: pre.etc}
	b.rep.add(title, b.restartReport(r))
	return nil
}

// restartManager stops the manager with SIGTERM, as a rollout of its Deployment does, and
// starts it again on the same data directory and flags, with its log read and its Stack
// queue scraped from its start.
func (b *bench) restartManager(ctx, wctx context.Context, r *restartRun) error {
	r.oldPID = b.mgr.pid()
	b.say("restart: stopping the manager (pid %d) with SIGTERM", r.oldPID)
	r.stopAt = time.Now()
	var err error
	if r.shutdown, err = b.stopManagerOnPurpose(2 * time.Minute); err != nil {
		return fmt.Errorf("failed to stop the manager: %w", err)
	}
	r.logPath = b.prefix + ".manager-restarted.log"
	b.say("restart: the manager exited after %s; starting it again (log %s)", secs(r.shutdown), r.logPath)
	r.start = time.Now()
	if err := b.startManagerAgain(ctx, r.logPath); err != nil {
		return fmt.Errorf("failed to start the manager again: %w", err)
	}
	r.up = time.Since(r.start)
	r.log = tailLog(wctx, r.logPath, restartLogPoll)
	r.queue = scrapeQueue(wctx, b.mgr.metricsURL, restartScrape)
	r.m = &measurement{b: b, of: b.manager(), sampling: b.sampleRSS(ctx)}
	return nil
}

// changeWhileCatchingUp makes the changes restartChangeDelay after the start: a new
// content of each changed Stack's own Program, while the new process still catches up.
func (b *bench) changeWhileCatchingUp(ctx context.Context, r *restartRun) error {
	if err := pause(ctx, time.Until(r.start.Add(restartChangeDelay))); err != nil {
		return err
	}
	content := fmt.Sprintf("${message} (changed after the restart, %d)", r.start.Unix())
	b.say("restart: changing the Programs of %d Stacks %s after the start", len(r.changed), secs(time.Since(r.start)))
	r.firstChange = time.Now()
	var err error
	r.changeAt, r.revs, err = b.changePrograms(ctx, nsFleet, r.changed, content, nil)
	return err
}

// waitCaughtUp waits until every change is Ready and every fleet Stack was reconciled
// (its first line in the new log), then counts Updates restartSettle longer.
func (b *bench) waitCaughtUp(ctx context.Context, r *restartRun) error {
	timeout := 10*time.Minute + time.Duration(r.n)*100*time.Millisecond
	deadline := time.Now().Add(timeout)
	r.readyChanged = b.waitRevisions(ctx, nsFleet, r.revs, timeout, func(k int) {
		first, _, _, _ := r.log.state()
		b.say("restart: %d/%d changed Stacks Ready; %d/%d Stacks reconciled after %s; manager %s", k, len(r.changed),
			len(first), r.total, secs(time.Since(r.start)), procLine(b.mgr.pid()))
	})
	var allReconciled bool
	err := pollUntil(ctx, time.Until(deadline), func() (bool, error) {
		first, _, _, lerr := r.log.state()
		if lerr != nil {
			return false, fmt.Errorf("failed to read %s: %w", r.logPath, lerr)
		}
		for _, name := range b.fleetNames {
			if _, ok := first[key(nsFleet, name)]; !ok {
				return false, nil
			}
		}
		allReconciled = true
		return true, nil
	})
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	b.say("restart: %d/%d changed Stacks Ready, every fleet Stack reconciled: %t; %s more to count Updates",
		r.readyChanged, len(r.changed), allReconciled, restartSettle)
	return pause(ctx, restartSettle)
}

// changeFigures are what the changed Stacks' runs were, each timed from its change.
type changeFigures struct {
	rows                    [][]string // one per Stack
	perStack                map[int]int
	notOne                  []string
	toRun, created, toReady []time.Duration
	runs                    []changeRun
}

// restartChanges reads the first Update of each changed Stack since the SIGTERM.
func (b *bench) restartChanges(r *restartRun) changeFigures {
	f := changeFigures{perStack: map[int]int{}}
	for _, name := range r.changed {
		c := r.changeAt[name]
		row := []string{name, secs(c.Sub(r.start)), "-", "-", "-"}
		first, k, ok := b.firstUpdateSince(nsFleet, name, r.stopAt)
		f.perStack[k]++
		if k != 1 && len(f.notOne) < 5 {
			f.notOne = append(f.notOne, fmt.Sprintf("%s (%d)", name, k))
		}
		if ok {
			f.created = append(f.created, first.seen.Sub(c))
			row[2] = secs(first.seen.Sub(c))
			if !first.run.IsZero() {
				f.toRun = append(f.toRun, first.run.Sub(c))
				row[3] = secs(first.run.Sub(c))
			}
			f.runs = append(f.runs, changeRun{change: c, run: first.run, done: first.done})
		}
		if at, ok := b.track.readyAt(nsFleet, name, r.revs[name]); ok {
			f.toReady = append(f.toReady, at.Sub(c))
			row[4] = secs(at.Sub(c))
		}
		f.rows = append(f.rows, row)
	}
	sort.Slice(f.rows, func(i, j int) bool { return f.rows[i][0] < f.rows[j][0] })
	return f
}

// strayUpdates are the Updates seen from the SIGTERM to the end of Stacks not changed:
// the engine runs the restart itself caused.
func (b *bench) strayUpdates(r *restartRun) (stray, examples []string) {
	isChanged := map[string]bool{}
	for _, name := range r.changed {
		isChanged[key(nsFleet, name)] = true
	}
	for _, u := range b.track.updatesIn("", r.stopAt, r.end) {
		if isChanged[u.stack] {
			continue
		}
		stray = append(stray, u.stack)
		if len(examples) < 5 {
			examples = append(examples, fmt.Sprintf("%s (%s, %s)", u.stack, u.typ, phaseName(u.phase)))
		}
	}
	return stray, examples
}

// restartReconciled is when the new process reconciled every fleet Stack (its first log
// line of each), or how many it never did.
func (b *bench) restartReconciled(r *restartRun, first map[string]time.Time) (all string, since []time.Duration) {
	var last time.Time
	missing := 0
	for _, name := range b.fleetNames {
		at, ok := first[key(nsFleet, name)]
		if !ok {
			missing++
			continue
		}
		since = append(since, at.Sub(r.start))
		last = maxTime(last, at)
	}
	if missing > 0 {
		return fmt.Sprintf("not reached: %d of %d fleet Stacks never reconciled in %s", missing, r.n, secs(r.end.Sub(r.start))), since
	}
	return secs(last.Sub(r.start)), since
}

// restartReport renders the scenario's section.
func (b *bench) restartReport(r *restartRun) string {
	first, lines, workers, _ := r.log.state()
	allRec, reconciledAt := b.restartReconciled(r, first)
	reached, drained := queueDrained(r.queue(), r.total)
	since := func(t time.Time) string {
		if t.IsZero() {
			return "not seen"
		}
		return secs(t.Sub(r.start))
	}
	ch := b.restartChanges(r)
	stray, strayEx := b.strayUpdates(r)
	par := b.cfg.Parallelism
	dispatch := dispatchLatencies(ch.runs, par)
	met := func(ds []time.Duration) string {
		if len(ds) == len(r.changed) && Percentile(ds, 99) < restartGoal {
			return "met"
		}
		return "not met"
	}
	rows := [][]string{
		{"fleet Stacks (Ready before the restart); Stacks in the cluster", fmt.Sprintf("%d; %d", r.n, r.total)},
		{"SIGTERM → old manager exited (pid " + fmt.Sprint(r.oldPID) + ")", secs(r.shutdown)},
		{"new process started → its metrics endpoint answers", secs(r.up)},
		{"start → Stack controller's workers started (log read)", since(workers)},
		{"**start → every fleet Stack reconciled** (its first `Reconciled Stack` log line, read every 100 ms)", allRec},
		{"first reconcile since start: p50 / p90 / p99 / max", percentiles(reconciledAt, 50, 90, 99, 100)},
		{fmt.Sprintf("start → `controller_runtime_reconcile_total{controller=\"stack\"}` ≥ %d (scraped 1/s)", r.total), since(reached)},
		{"start → then the stack queue drained (`workqueue_depth` 0, no active worker)", since(drained)},
		{"Stack reconciles in the new log until the end (all Stacks)", fmt.Sprintf("%d (%d Stacks)", lines, len(first))},
		{"**engine runs caused: Updates created after the SIGTERM, not of a changed Stack** (goal 0)", fmt.Sprint(len(stray)) + exampleString(strayEx)},
		{fmt.Sprintf("changes made (own Program's greeting content), first at start + %s", secs(r.firstChange.Sub(r.start))),
			fmt.Sprintf("%d (%d Ready at their new revision)", len(r.changed), r.readyChanged)},
		{"**change → runner start (Update seen Running)**: median / p99 / max (n)", pctRow(ch.toRun)},
		{fmt.Sprintf("change → runner start less the wait for a slot the other changes held (%d slots): median / p99 / max (n)", par), pctRow(dispatch)},
		{fmt.Sprintf("goal of the issue: change → runner start p99 < %s", secs(restartGoal)),
			fmt.Sprintf("%s; less the wait for a slot the other changes held: %s", met(ch.toRun), met(dispatch))},
		{"change → Update created (seen): median / p99 / max (n)", pctRow(ch.created)},
		{"change → Stack Ready at the new revision: median / p99 / max (n)", pctRow(ch.toReady)},
		{"Updates per changed Stack after the SIGTERM (should be 1 each)", countsString(ch.perStack) + exampleString(ch.notOne)},
		{"manager peak RSS since the start (sampled 1/s)", MiB(r.m.peakRSS())},
	}
	rows = append(rows, r.m.costRows()...)
	body := b.restartIntro(r) + table([]string{"restart", ""}, rows) +
		"\nPer changed Stack (times since its change; *changed at* since the start):\n\n" +
		table([]string{"Stack", "changed at", "→ Update created", "→ Running", "→ Ready"}, ch.rows)
	if len(stray) > 0 {
		byStack := map[string]int{}
		for _, s := range stray {
			byStack[s]++
		}
		body += fmt.Sprintf("\n%d Stacks got Updates they had no change for.\n", len(byStack))
	}
	if r.readyChanged < len(r.changed) {
		body += "\n" + b.notReady(nsFleet, r.changed, "the changed revision")
	}
	return body
}

func (b *bench) restartIntro(r *restartRun) string {
	return fmt.Sprintf("The Ready fleet's manager is stopped with SIGTERM (as a rollout of its Deployment would) and started "+
		"again with the same data directory and flags (log `%s`). %s after the new process started, %d fleet Stacks, "+
		"spread over the fleet's names, get a new content for their own Program's `greeting` File: a real change of "+
		"desired state. Times are since the new process was started (exec), when the harness saw them. *Every Stack "+
		"reconciled* is the figure: the Stack controller logs `Reconciled Stack` at the end of every reconcile, and the "+
		"harness reads the log every 100 ms (the counter `controller_runtime_reconcile_total` also counts a Stack's "+
		"second reconciles, e.g. the changed ones', so reaching the Stack count is only a bound; the queue drained "+
		"after it is the other bound). *Engine runs caused* are Updates the harness's watch saw created from the "+
		"SIGTERM until %s after the last of: every Stack reconciled, every change Ready. A change's latency is from "+
		"its Program's patch to its Update seen Running; the changes are made at once, so with %d runner slots "+
		"most of them wait for the others' runs: the next row takes out the wait for a slot all of whose holders were "+
		"other changes' runs (the k-th run to start could not start before the (k−%d)-th of the earlier ones ended). The cost rows cover the new process from its start "+
		"(its counters start at zero).\n\n", filepath.Base(r.logPath), restartChangeDelay, len(r.changed), restartSettle,
		b.cfg.Parallelism, b.cfg.Parallelism-1)
}
