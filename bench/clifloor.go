package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/source/program/project"
	"github.com/stackwright/stackwright/internal/testing/pulumicount"
)

// cliFloor is the physical floor of an engine operation: the pulumi CLI called directly,
// with the fewest calls an operation needs, next to internal/engine doing the same, on the
// same program, backend and machine. Every process count comes from a pulumi shim that
// logs each start.
type cliFloor struct {
	// Steady is `pulumi up --skip-preview --yes` on an existing stack whose program and
	// config are unchanged; First is a new stack's first update (`stack init`, then `up`
	// with its config on the command line).
	Steady, First cliBatch
	// EngineSteady and EngineFirst are the same two operations through internal/engine.
	EngineSteady, EngineFirst cliBatch
	// SteadyWide is Steady on Width stacks at once, each updated in turn: what the
	// machine does at the manager's parallelism, the floor of a fleet of steady updates.
	SteadyWide cliBatch
	Width      int
}

// cliBatch is one kind of operation, run sequentially.
type cliBatch struct {
	// Runs are the successful runs' durations; Attempts counts failed ones too, which
	// cost CPU and processes all the same.
	Runs     []time.Duration
	Attempts int
	// CPU is the CPU of every process the batch started (pulumi, language host, provider)
	// and the harness's own, which for the engine batches is the engine's in-process work.
	CPU time.Duration
	// Processes counts pulumi CLI processes started.
	Processes int
	FirstErr  string
	// Wall is the batch's elapsed time.
	Wall time.Duration
}

// CPUPerRun is the CPU of one attempt (0 with none).
func (b cliBatch) CPUPerRun() time.Duration {
	if b.Attempts == 0 {
		return 0
	}
	return b.CPU / time.Duration(b.Attempts)
}

// Throughput is successful runs per second of wall time.
func (b cliBatch) Throughput() float64 {
	if b.Wall <= 0 {
		return 0
	}
	return float64(len(b.Runs)) / b.Wall.Seconds()
}

// cliRunner runs the CLI floor's operations, the CLI's and the engine's, on one project,
// counting pulumi processes through a shim.
type cliRunner struct {
	ctx     context.Context
	counter *pulumicount.Counter
	// cli runs the pulumi CLI; viaEngine an update through internal/engine, exists being
	// what the Stack controller tells the engine once an update succeeded.
	cli       func(args ...string) error
	viaEngine func(stack string, exists bool) error
}

const setMessage = "message=" + greetingMessage

// runCLIFloor measures the CLI floor and internal/engine's same operations, n of each, and
// the CLI's steady update on width stacks at once, n on each.
func (f *floorEnv) runCLIFloor(ctx context.Context, realBin string, n, width int) (*cliFloor, error) {
	r, err := f.newCLIRunner(ctx, realBin)
	if err != nil {
		return nil, err
	}
	cli := r.cli
	// One stack of each path exists before the steady-state runs; creating it is not counted.
	if err := r.newStack("cli-steady"); err != nil {
		return nil, err
	}
	if err := r.viaEngine("engine-steady", false); err != nil {
		return nil, err
	}
	out := &cliFloor{Width: width}
	batches := []struct {
		into *cliBatch
		run  func(i int) error
	}{
		{&out.Steady, func(int) error { return cli("up", "--skip-preview", "--yes", "-s", "cli-steady") }},
		{&out.First, func(i int) error { return r.newStack(fmt.Sprintf("cli-first-%d", i)) }},
		{&out.EngineSteady, func(int) error { return r.viaEngine("engine-steady", true) }},
		{&out.EngineFirst, func(i int) error { return r.viaEngine(fmt.Sprintf("engine-first-%d", i), false) }},
	}
	for _, b := range batches {
		if err := r.batch(n, b.into, b.run); err != nil {
			return nil, err
		}
	}
	stacks := []string{"cli-steady"}
	for i := 1; i < width; i++ {
		name := fmt.Sprintf("cli-steady-%d", i)
		if err := r.newStack(name); err != nil {
			return nil, err
		}
		stacks = append(stacks, name)
	}
	r.wide(n, stacks, &out.SteadyWide)
	return out, ctx.Err()
}

// newCLIRunner writes the bench project and sets up the counted CLI and engine on it.
func (f *floorEnv) newCLIRunner(ctx context.Context, realBin string) (*cliRunner, error) {
	dir := filepath.Join(f.dir, "cli")
	counter, err := pulumicount.New(realBin, dir)
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(engine.Options{Bin: counter.Bin, PulumiHome: filepath.Join(f.dir, "pulumi-home"), Env: engine.BaseEnv()})
	if err != nil {
		return nil, fmt.Errorf("failed to set up the counted engine: %w", err)
	}
	work := filepath.Join(dir, "work")
	if err := writeBenchProject(work, f.shape); err != nil {
		return nil, err
	}
	msg, _ := json.Marshal(greetingMessage)
	env := f.runEnv("cli")
	return &cliRunner{ctx: ctx, counter: counter, cli: f.pulumiCLI(ctx, counter.Bin, work, dir),
		viaEngine: func(stack string, exists bool) error {
			tail := engine.NewTail(8192)
			_, err := eng.Run(ctx, engine.Request{
				Operation: engine.OpUp, WorkDir: work, Stack: stack, CreateStack: true, StackExists: exists,
				Config: map[string]engine.ConfigValue{"message": {Value: msg}}, Env: env, Log: tail,
			})
			if err != nil {
				return fmt.Errorf("%s: %s\n%s", stack, engine.Message(err), tail.String())
			}
			return nil
		}}, nil
}

// newStack is a new stack's first update with the fewest CLI calls.
func (r *cliRunner) newStack(name string) error {
	if err := r.cli("stack", "init", name); err != nil {
		return err
	}
	return r.cli("up", "--skip-preview", "--yes", "-s", name, "-c", setMessage)
}

// batch runs run n times, one after the other, into b.
func (r *cliRunner) batch(n int, b *cliBatch, run func(i int) error) error {
	starts, cpu, t0 := r.counter.Count(), childrenCPU()+selfCPU(), time.Now()
	for i := range n {
		if r.ctx.Err() != nil {
			return r.ctx.Err()
		}
		t := time.Now()
		b.Attempts++
		if err := run(i); err != nil {
			if b.FirstErr == "" {
				b.FirstErr = err.Error()
			}
			continue
		}
		b.Runs = append(b.Runs, time.Since(t))
	}
	b.CPU, b.Processes = childrenCPU()+selfCPU()-cpu, r.counter.Count()-starts
	b.Wall = time.Since(t0)
	return nil
}

// wide runs the CLI's steady update on every stack at once, n times each, into b.
func (r *cliRunner) wide(n int, stacks []string, b *cliBatch) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	starts, cpu, t0 := r.counter.Count(), childrenCPU()+selfCPU(), time.Now()
	for _, stack := range stacks {
		wg.Go(func() {
			for range n {
				if r.ctx.Err() != nil {
					return
				}
				t := time.Now()
				err := r.cli("up", "--skip-preview", "--yes", "-s", stack)
				mu.Lock()
				b.Attempts++
				if err != nil && b.FirstErr == "" {
					b.FirstErr = err.Error()
				} else if err == nil {
					b.Runs = append(b.Runs, time.Since(t))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.Wall = time.Since(t0)
	b.CPU, b.Processes = childrenCPU()+selfCPU()-cpu, r.counter.Count()-starts
}

// pulumiCLI returns a function that runs the pulumi of bin in work, as a person would on
// the CLI floor's stacks: with the environment the manager gives its engine and the "cli"
// run environment, HOME at home.
func (f *floorEnv) pulumiCLI(ctx context.Context, bin, work, home string) func(args ...string) error {
	return func(args ...string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "pulumi"), append(args, "--non-interactive")...)
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + home, "PULUMI_HOME=" + filepath.Join(f.dir, "pulumi-home")}
		for k, v := range engine.BaseEnv() {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		for k, v := range f.runEnv("cli") {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("pulumi %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
}

// writeBenchProject writes the bench program of the given shape as Pulumi.yaml into dir.
func writeBenchProject(dir, shape string) error {
	yaml, err := project.Render(programFor("floor", "cli", shape))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("failed to create directory %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, project.File), yaml, 0o600); err != nil {
		return fmt.Errorf("failed to write %s: %w", project.File, err)
	}
	return nil
}

// cliFloorSection renders the measurements with every ratio to the CLI's steady update.
func cliFloorSection(c *cliFloor) string {
	floor := Percentile(c.Steady.Runs, 50)
	perRun := func(b cliBatch) (cpu time.Duration, procs float64) {
		if b.Attempts == 0 {
			return 0, 0
		}
		return b.CPUPerRun(), float64(b.Processes) / float64(b.Attempts)
	}
	floorCPU, _ := perRun(c.Steady)
	ratio := func(a, b time.Duration) string {
		if b <= 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f×", a.Seconds()/b.Seconds())
	}
	row := func(name string, b cliBatch) []string {
		med := Percentile(b.Runs, 50)
		cpu, procs := perRun(b)
		return []string{name, fmt.Sprint(len(b.Runs)), secs(med), secs(Percentile(b.Runs, 90)), secs(cpu), fmt.Sprintf("%.1f", procs), ratio(med, floor), ratio(cpu, floorCPU)}
	}
	body := "The floor every ratio in this report is measured against: the pulumi CLI called directly on the bench program, " +
		"same backend, PULUMI_HOME, passphrase file and environment as the manager's engine, one run at a time. " +
		"*Steady* is an update of an existing stack whose program and config are unchanged; *first* is a new stack's first update " +
		"with the fewest CLI calls (`pulumi stack init`, then `pulumi up --skip-preview --yes -c message=…`). " +
		"The engine rows are internal/engine doing the same. *CPU / run* includes every process the run started " +
		"(CLI, YAML language host, provider) and the harness's own CPU meanwhile (for the engine rows, its in-process work: " +
		"reading the event log, deriving a new stack's passphrase key to read its secret outputs); " +
		"*pulumi processes / run* counts CLI starts through a logging shim.\n\n" +
		table([]string{"operation", "runs", "median", "p90", "CPU / run", "pulumi processes / run", "median / CLI steady", "CPU / CLI steady CPU"}, [][]string{
			row("CLI: steady update (`pulumi up --skip-preview`)", c.Steady),
			row("CLI: first update (`stack init` + `up`)", c.First),
			row("engine: steady update", c.EngineSteady),
			row("engine: first update", c.EngineFirst),
			row(fmt.Sprintf("CLI: steady update, %d stacks at a time", c.Width), c.SteadyWide),
		}) +
		fmt.Sprintf("\nAt %d at a time the CLI's steady update runs at %.2f/s (%d runs in %s): on this machine, "+
			"the most any number of steady updates at the manager's parallelism can reach.\n",
			c.Width, c.SteadyWide.Throughput(), len(c.SteadyWide.Runs), secs(c.SteadyWide.Wall))
	var errs []string
	for _, b := range []cliBatch{c.Steady, c.First, c.EngineSteady, c.EngineFirst, c.SteadyWide} {
		if b.FirstErr != "" {
			errs = append(errs, b.FirstErr)
		}
	}
	if len(errs) > 0 {
		body += "\nFirst failures:\n\n```\n" + strings.Join(errs, "\n") + "\n```\n"
	}
	return body
}
