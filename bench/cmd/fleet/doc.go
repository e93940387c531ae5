// Command fleet runs Stackwright's benchmark harness (package bench): a control plane from
// ./bin, the manager as a separate process, and the floor, latency, fleet, idle, drift and
// git scenarios (drift only when named), with results in bench/results/. `make bench` runs
// it after `make tools build`.
//
// Every flag has an environment variable, which is how `make bench` is sized:
//
//	BENCH_N=1000 BENCH_IDLE=1m BENCH_SCENARIOS=floor,fleet,idle make bench
package main
