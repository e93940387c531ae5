package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stackwright/stackwright/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type managerArgs []string

func (m *managerArgs) String() string     { return strings.Join(*m, " ") }
func (m *managerArgs) Set(v string) error { *m = append(*m, v); return nil }

func run() error {
	var (
		cfg       bench.Config
		scenarios string
		extra     managerArgs
	)
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.IntVar(&cfg.N, "n", envInt("BENCH_N", 100), "Stacks in the fleet (BENCH_N).")
	fs.DurationVar(&cfg.Idle, "idle", envDuration("BENCH_IDLE", 5*time.Minute), "Length of the idle phase (BENCH_IDLE).")
	fs.StringVar(&scenarios, "scenarios", envString("BENCH_SCENARIOS", strings.Join(bench.DefaultScenarios, ",")),
		"Comma-separated scenarios to run: floor, latency, fleet, resync, idle, restart, drift, git, faulty, rollout, templates, secrets, shards (BENCH_SCENARIOS).")
	fs.IntVar(&cfg.SecretsN, "secrets-n", envInt("BENCH_SECRETS_N", 10000), "Unrelated 10 KiB Secrets the secrets scenario creates (BENCH_SECRETS_N).")
	fs.IntVar(&cfg.RolloutN, "rollout-n", envInt("BENCH_ROLLOUT_N", 0), "Stacks of the rollout scenario; 0 means N (BENCH_ROLLOUT_N).")
	fs.DurationVar(&cfg.RolloutBake, "rollout-bake", envDuration("BENCH_ROLLOUT_BAKE", 0), "bakeTime of the rollout scenario's StackRollout (BENCH_ROLLOUT_BAKE).")
	fs.StringVar(&cfg.Program, "program", envString("BENCH_PROGRAM", bench.ProgramFiles), "Program of the floors, latency, fleet and shards: files (3 resources) or file (1 File, no secret output) (BENCH_PROGRAM).")
	fs.StringVar(&cfg.FleetBackend, "fleet-backend", envString("BENCH_FLEET_BACKEND", bench.FleetBackendNamespace), "Fleet Stacks' state: namespace (the namespace's shared file:// backend) or stack (one file:// backend each) (BENCH_FLEET_BACKEND).")
	fs.IntVar(&cfg.RestartChanges, "restart-changes", envInt("BENCH_RESTART_CHANGES", 20), "Fleet Stacks the restart scenario changes 5 s after the manager's new start (BENCH_RESTART_CHANGES).")
	fs.IntVar(&cfg.ShardsN, "shards-n", envInt("BENCH_SHARDS_N", 2000), "Stacks of the shards scenario, split over its two managers (BENCH_SHARDS_N).")
	fs.IntVar(&cfg.FloorRuns, "floor-runs", envInt("BENCH_FLOOR_N", 10), "Engine runs in each floor batch (BENCH_FLOOR_N).")
	fs.IntVar(&cfg.LatencyRuns, "latency-runs", envInt("BENCH_LATENCY_RUNS", 10), "Apply→Ready repetitions (BENCH_LATENCY_RUNS).")
	fs.IntVar(&cfg.Parallelism, "parallel", envInt("BENCH_PARALLEL", 2), "--max-concurrent-updates, and the parallel floor's width (BENCH_PARALLEL).")
	fs.IntVar(&cfg.DriftN, "drift-n", envInt("BENCH_DRIFT_N", 100), "Fleet Stacks given a drift schedule, at most N (BENCH_DRIFT_N).")
	fs.StringVar(&cfg.DriftCron, "drift-cron", envString("BENCH_DRIFT_CRON", "*/5 * * * *"), "Cron of the drift schedule (BENCH_DRIFT_CRON).")
	fs.DurationVar(&cfg.DriftWindow, "drift-window", envDuration("BENCH_DRIFT_WINDOW", 10*time.Minute), "How long drift checks are counted (BENCH_DRIFT_WINDOW).")
	fs.IntVar(&cfg.GitN, "git-n", envInt("BENCH_GIT_N", 0), "Stacks in the git fleet; 0 means N (BENCH_GIT_N).")
	fs.Int64Var(&cfg.GitResync, "git-resync", int64(envInt("BENCH_GIT_RESYNC", 0)), "resyncFrequencySeconds of the git Stacks; 0 leaves the product default (BENCH_GIT_RESYNC).")
	fs.DurationVar(&cfg.GitSettle, "git-settle", envDuration("BENCH_GIT_SETTLE", 2*time.Minute), "How long the git fleet is left alone before the manager's RSS is read, after each commit is Ready (BENCH_GIT_SETTLE).")
	fs.IntVar(&cfg.ProfileSeconds, "profile-seconds", envInt("BENCH_PROFILE_SECONDS", 30), "Length of the manager CPU profile taken during the fleet (BENCH_PROFILE_SECONDS).")
	fs.DurationVar(&cfg.FleetTimeout, "fleet-timeout", envDuration("BENCH_FLEET_TIMEOUT", 0), "Longest wait for a fleet; 0 is 4 × the ideal time (at least 5 s a run) + 5 min (BENCH_FLEET_TIMEOUT).")
	fs.DurationVar(&cfg.RunnerDeadline, "runner-deadline", envDuration("BENCH_RUNNER_DEADLINE", 15*time.Second), "The manager's --runner-deadline (BENCH_RUNNER_DEADLINE).")
	fs.IntVar(&cfg.CreateWorkers, "create-workers", envInt("BENCH_CREATE_WORKERS", 8), "Concurrent clients creating the fleet (BENCH_CREATE_WORKERS).")
	fs.StringVar(&cfg.Results, "results", os.Getenv("BENCH_RESULTS"), "Results directory (default bench/results; BENCH_RESULTS).")
	fs.StringVar(&cfg.Bin, "bin", "", "Toolchain directory (default ./bin of the checkout).")
	fs.StringVar(&cfg.Manager, "manager", "", "The stackwright binary (default bin/stackwright, built by make build).")
	fs.BoolVar(&cfg.KeepWork, "keep-work", os.Getenv("BENCH_KEEP_WORK") == "1", "Keep the temporary work directory (BENCH_KEEP_WORK=1).")
	fs.Var(&extra, "manager-arg", "Extra flag for the manager; repeatable (e.g. -manager-arg=--max-concurrent-reconciles=20).")
	if err := fs.Parse(os.Args[1:]); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	for s := range strings.SplitSeq(scenarios, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.Scenarios = append(cfg.Scenarios, s)
		}
	}
	cfg.ManagerArgs = extra
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench.Run(ctx, cfg)
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: ignoring %s=%q: %v\n", name, v, err)
		return def
	}
	return n
}

func envDuration(name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: ignoring %s=%q: %v\n", name, v, err)
		return def
	}
	return d
}
