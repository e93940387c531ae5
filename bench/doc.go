// Package bench is Stackwright's benchmark harness: in one run on one machine it starts a
// control plane from ./bin (envtest) and the manager as a separate process, and measures,
// against the same trivial Pulumi YAML program throughout:
//
//   - floor: the program run directly through internal/engine, sequentially and with the
//     manager's parallelism, which is what no operator can beat;
//   - latency: one Program + Stack, apply to Ready, repeated;
//   - fleet: N Stacks created at once, time until all are Ready, the manager's RSS, CPU,
//     API traffic and a CPU profile taken while it works;
//   - idle: the fleet left alone, which should cost (almost) nothing;
//   - drift (only when named): drift schedules on part of the fleet, the checks they start
//     in a window against those due, and what the checks cost;
//   - git: N Stacks on one branch of a local repository served over smart HTTP, one push,
//     time until all are Ready on the new commit (only when the manager serves git).
//
// It reports and never judges: results go to bench/results/<date>-n<N>.md with the machine
// description, next to the manager's log and the CPU profile. `make bench` runs it; see
// cmd/fleet for the flags and their BENCH_* environment variables.
//
// The unit tests cover only pure helpers (percentiles, /proc and metrics parsing, cron
// slots): nothing here starts a fleet under `go test`.
package bench
