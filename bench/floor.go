package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/source/program/project"
)

// floorResult is the engine floor: the bench program run straight through internal/engine.
type floorResult struct {
	Sequential, Parallel floorRun
	Parallelism          int
	Version              string
	// CLI is the pulumi CLI's own floor, which ratios are measured against.
	CLI *cliFloor
}

type floorRun struct {
	Runs   []time.Duration
	Wall   time.Duration
	Failed int
	// EngineCPU is the CPU time of the pulumi processes (CLI, YAML host, provider) the
	// runs started and reaped, and of the engine's in-process work: RUSAGE_CHILDREN plus
	// RUSAGE_SELF of the harness over the batch.
	EngineCPU time.Duration
	FirstErr  string
}

// Throughput is runs per second.
func (f floorRun) Throughput() float64 {
	if f.Wall == 0 {
		return 0
	}
	return float64(len(f.Runs)) / f.Wall.Seconds()
}

// floorEnv is the environment the manager gives its engine: the same engine options
// (PULUMI_HOME under the data dir, update checks and plugin downloads off), a file://
// backend with one directory for the "namespace", the default passphrase file, and the
// provider's root directory as the Stack's envRefs set it.
type floorEnv struct {
	eng        *engine.Engine
	dir        string
	backend    string
	passphrase string
	// shape is the program the floors run (BENCH_PROGRAM).
	shape string
}

func newFloorEnv(bin, dir, shape string) (*floorEnv, error) {
	f := &floorEnv{dir: dir, backend: "file://" + filepath.Join(dir, "state"), passphrase: filepath.Join(dir, "passphrase"), shape: shape}
	for _, d := range []string{"pulumi-home", "state", "work", "files"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	if err := os.WriteFile(f.passphrase, []byte(base64.RawURLEncoding.EncodeToString(b)), 0o600); err != nil {
		return nil, err
	}
	eng, err := engine.New(engine.Options{
		Bin:        bin,
		PulumiHome: filepath.Join(dir, "pulumi-home"),
		Env:        engine.BaseEnv(),
	})
	if err != nil {
		return nil, fmt.Errorf("failed to set up the pulumi engine: %w", err)
	}
	f.eng = eng
	return f, nil
}

// runEnv is what a Stack adds for its runs: the backend, the passphrase file, and the
// provider's root directory, one per name.
func (f *floorEnv) runEnv(name string) map[string]string {
	return map[string]string{
		"PULUMI_BACKEND_URL":            f.backend,
		"PULUMI_CONFIG_PASSPHRASE_FILE": f.passphrase,
		"STACKWRIGHT_TESTING_ROOT":      filepath.Join(f.dir, "files", name),
	}
}

// up runs `up` of a fresh stack of the bench program named name and returns its duration.
// The timer covers engine.Run only, not writing Pulumi.yaml.
func (f *floorEnv) up(ctx context.Context, name string) (time.Duration, error) {
	p := programFor("floor", name, f.shape)
	yaml, err := project.Render(p)
	if err != nil {
		return 0, err
	}
	work := filepath.Join(f.dir, "work", name)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(work, project.File), yaml, 0o600); err != nil {
		return 0, err
	}
	msg, _ := json.Marshal(greetingMessage)
	tail := engine.NewTail(8192)
	start := time.Now()
	res, err := f.eng.Run(ctx, engine.Request{
		Operation:   engine.OpUp,
		WorkDir:     work,
		Stack:       "dev",
		Config:      map[string]engine.ConfigValue{"message": {Value: msg}},
		CreateStack: true,
		Env:         f.runEnv(name),
		Log:         tail,
	})
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("%s: %s\n%s", name, engine.Message(err), tail.String())
	}
	// The stack itself and the program's resources.
	if want := 1 + len(p.Program.Resources); res.Changes["create"] != want {
		return d, fmt.Errorf("%s: want %d resources created, got %v", name, want, res.Changes)
	}
	return d, nil
}

// runFloor runs n fresh stacks with the given parallelism.
func (f *floorEnv) runFloor(ctx context.Context, prefix string, n, parallel int) floorRun {
	var (
		mu  sync.Mutex
		out floorRun
		wg  sync.WaitGroup
	)
	next := make(chan int)
	cpu0 := childrenCPU() + selfCPU()
	start := time.Now()
	for range parallel {
		wg.Go(func() {
			for i := range next {
				d, err := f.up(ctx, fmt.Sprintf("%s-%d", prefix, i))
				mu.Lock()
				if err != nil {
					out.Failed++
					if out.FirstErr == "" {
						out.FirstErr = err.Error()
					}
				} else {
					out.Runs = append(out.Runs, d)
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	out.Wall = time.Since(start)
	out.EngineCPU = childrenCPU() + selfCPU() - cpu0
	return out
}

// childrenCPU is the user + system CPU time of the harness's terminated, reaped children.
func childrenCPU() time.Duration { return rusage(syscall.RUSAGE_CHILDREN) }

// selfCPU is this process's own CPU: what internal/engine does in-process (parsing event
// logs, deriving passphrase keys) when the harness calls it directly.
func selfCPU() time.Duration { return rusage(syscall.RUSAGE_SELF) }

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
