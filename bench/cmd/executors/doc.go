// Command executors benchmarks the two executors on the one-node cluster of `make cluster`
// (`make bench-executors`): Stackwright is installed with its Helm chart, once with
// executor=local and once with executor=job, and for each it measures apply → Ready of
// single Stacks one after another, then a fleet of Stacks applied at once. For the Job
// executor it also splits each run into what Kubernetes adds (Job created → runner
// container started) and the rest, and for both it splits the single runs into phases
// (Update created, claimed, Job and Pod created, runner running, Update finished, Stack
// Ready) as its watches first see them. Results go to bench/results/<date>-executors.md.
package main
