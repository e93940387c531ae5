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

// runCLIFloor measures the CLI floor and internal/engine's same operations, n of each, and
// the CLI's steady update on width stacks at once, n on each.
func (f *floorEnv) runCLIFloor(ctx context.Context, realBin string, n, width int) (*cliFloor, error) {
	dir := filepath.Join(f.dir, "cli")
	counter, err := pulumicount.New(realBin, dir)
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(engine.Options{Bin: counter.Bin, PulumiHome: filepath.Join(f.dir, "pulumi-home"), Env: engine.BaseEnv()})
	if err != nil {
		return nil, fmt.Errorf("failed to set up the counted engine: %w", err)
	}
	msg, _ := json.Marshal(greetingMessage)
	work := filepath.Join(dir, "work")
	if err := writeBenchProject(work, f.shape); err != nil {
		return nil, err
	}
	env := f.runEnv("cli")
	cli := f.pulumiCLI(ctx, counter.Bin, work, dir)
	// exists is what the Stack controller tells the engine once an update succeeded.
	viaEngine := func(stack string, exists bool) error {
		tail := engine.NewTail(8192)
		_, err := eng.Run(ctx, engine.Request{
			Operation: engine.OpUp, WorkDir: work, Stack: stack, CreateStack: true, StackExists: exists,
			Config: map[string]engine.ConfigValue{"message": {Value: msg}}, Env: env, Log: tail,
		})
		if err != nil {
			return fmt.Errorf("%s: %s\n%s", stack, engine.Message(err), tail.String())
		}
		return nil
	}
	setMessage := "message=" + greetingMessage

	out := &cliFloor{}
	// One stack of each path exists before the steady-state runs; creating it is not counted.
	if err := cli("stack", "init", "cli-steady"); err != nil {
		return nil, err
	}
	if err := cli("up", "--skip-preview", "--yes", "-s", "cli-steady", "-c", setMessage); err != nil {
		return nil, err
	}
	if err := viaEngine("engine-steady", false); err != nil {
		return nil, err
	}
	batches := []struct {
		into *cliBatch
		run  func(i int) error
	}{
		{&out.Steady, func(int) error { return cli("up", "--skip-preview", "--yes", "-s", "cli-steady") }},
		{&out.First, func(i int) error {
			name := fmt.Sprintf("cli-first-%d", i)
			if err := cli("stack", "init", name); err != nil {
				return err
			}
			return cli("up", "--skip-preview", "--yes", "-s", name, "-c", setMessage)
		}},
		{&out.EngineSteady, func(int) error { return viaEngine("engine-steady", true) }},
		{&out.EngineFirst, func(i int) error { return viaEngine(fmt.Sprintf("engine-first-%d", i), false) }},
	}
	for _, b := range batches {
		starts, cpu, t0 := counter.Count(), childrenCPU()+selfCPU(), time.Now()
		for i := range n {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			t0 := time.Now()
			b.into.Attempts++
			if err := b.run(i); err != nil {
				if b.into.FirstErr == "" {
					b.into.FirstErr = err.Error()
				}
				continue
			}
			b.into.Runs = append(b.into.Runs, time.Since(t0))
		}
		b.into.CPU, b.into.Processes = childrenCPU()+selfCPU()-cpu, counter.Count()-starts
		b.into.Wall = time.Since(t0)
	}

	out.Width = width
	stacks := []string{"cli-steady"}
	for i := 1; i < width; i++ {
		name := fmt.Sprintf("cli-steady-%d", i)
		if err := cli("stack", "init", name); err != nil {
			return nil, err
		}
		if err := cli("up", "--skip-preview", "--yes", "-s", name, "-c", setMessage); err != nil {
			return nil, err
		}
		stacks = append(stacks, name)
	}
	wide := &out.SteadyWide
	var mu sync.Mutex
	var wg sync.WaitGroup
	starts, cpu, t0 := counter.Count(), childrenCPU()+selfCPU(), time.Now()
	for _, stack := range stacks {
		wg.Go(func() {
			for range n {
				if ctx.Err() != nil {
					return
				}
				t := time.Now()
				err := cli("up", "--skip-preview", "--yes", "-s", stack)
				mu.Lock()
				wide.Attempts++
				if err != nil && wide.FirstErr == "" {
					wide.FirstErr = err.Error()
				} else if err == nil {
					wide.Runs = append(wide.Runs, time.Since(t))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wide.Wall = time.Since(t0)
	wide.CPU, wide.Processes = childrenCPU()+selfCPU()-cpu, counter.Count()-starts
	return out, ctx.Err()
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
