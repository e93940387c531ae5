package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/bench"
	"github.com/stackwright/stackwright/internal/executor/job"
)

func main() {
	runs := flag.Int("runs", 5, "single Stacks applied one after another, per executor")
	fleet := flag.Int("fleet", 20, "Stacks applied at once, per executor")
	parallel := flag.Int("parallel", 2, "maxConcurrentUpdates of the install")
	out := flag.String("out", "bench/results", "directory for the results file")
	flag.Parse()
	if err := run(*runs, *fleet, *parallel, *out); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type result struct {
	executor string
	single   []time.Duration
	overhead []time.Duration // Job created → runner started (job only)
	fleetN   int
	fleet    time.Duration
	// phases are the spans of the single runs, podStart Job created → runner container
	// running over every run, as the benchmark's watches saw them.
	phases   map[[2]string][]time.Duration
	podStart []time.Duration
}

func run(runs, fleet, parallel int, out string) error {
	c, err := bench.ClusterClient("make bench-executors")
	if err != nil {
		return err
	}
	ctx := context.Background()
	var results []result
	for _, executor := range []string{"local", "job"} {
		r, err := measure(ctx, c, executor, runs, fleet, parallel)
		if err != nil {
			return fmt.Errorf("executor %s: %w", executor, err)
		}
		results = append(results, r)
	}
	report := render(results, runs, parallel)
	fmt.Print(report)
	// Named by the fleet's size, so that a run of another size does not replace the day's.
	path := filepath.Join(out, fmt.Sprintf("%s-executors-n%d.md", time.Now().UTC().Format("2006-01-02"), fleet))
	return os.WriteFile(path, []byte(report), 0o644)
}

func measure(ctx context.Context, c client.WithWatch, executor string, runs, fleet, parallel int) (result, error) {
	r := result{executor: executor, fleetN: fleet}
	// The namespace comes first: the chart grants the manager its Role there.
	ns := "bench-" + executor
	if _, err := bench.Bin("kubectl", "create", "namespace", ns); err != nil {
		return r, err
	}
	defer func() { _, _ = bench.Bin("kubectl", "delete", "namespace", ns, "--wait", "--timeout=5m") }()
	if _, err := bench.Bin("helm", "install", "stackwright", "charts/stackwright", "-n", "stackwright-system", "--create-namespace",
		"--wait", "--timeout=5m", "--set", "executor="+executor, "--set", fmt.Sprintf("maxConcurrentUpdates=%d", parallel),
		// The programs use the test provider, which only the testing image ships
		// (make images-testing); the local executor serves the one benchmark namespace.
		"--set", "image.repository=localhost/stackwright-testing", "--set", "runner.image.repository=localhost/stackwright-testing",
		"--set", "watchNamespaces={"+ns+"}"); err != nil {
		return r, err
	}
	defer bench.Uninstall(ns)
	// Leader election and caches: the first Stack must not pay for them.
	time.Sleep(20 * time.Second)

	if _, err := bench.KubectlApply(ns, secretYAML); err != nil {
		return r, err
	}
	tl := newTimeline()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	tl.watch(wctx, c, ns)
	var singles []string
	for i := range runs {
		name := fmt.Sprintf("single-%d", i)
		singles = append(singles, name)
		start := time.Now()
		tl.Mark(name, msApplied, start)
		if _, err := bench.KubectlApply(ns, stackYAML(name, stateDir(executor, ns))); err != nil {
			return r, err
		}
		if err := waitReady(ctx, c, ns, []string{name}, 5*time.Minute); err != nil {
			return r, err
		}
		r.single = append(r.single, tl.since(start, time.Now(), name))
	}
	names := make([]string, fleet)
	var docs []string
	for i := range fleet {
		names[i] = fmt.Sprintf("fleet-%d", i)
		docs = append(docs, stackYAML(names[i], stateDir(executor, ns)))
	}
	start := time.Now()
	for _, n := range names {
		tl.Mark(n, msApplied, start)
	}
	if _, err := bench.KubectlApply(ns, strings.Join(docs, "---\n")); err != nil {
		return r, err
	}
	if err := waitReady(ctx, c, ns, names, 30*time.Minute); err != nil {
		return r, err
	}
	r.fleet = tl.since(start, time.Now(), names...)
	// The last runners' containers are seen terminated a moment after their Stacks are
	// Ready.
	time.Sleep(3 * time.Second)
	r.phases = tl.spans(singles)
	if executor == "job" {
		r.overhead = podStartOverhead(ctx, c, ns)
		r.podStart = tl.spans(append(singles, names...))[[2]string{msJobCreated, msRunnerStarted}]
	}
	return r, nil
}

// podStartOverhead is, for each runner Job, the time from its creation to its runner
// container starting: scheduling, sandbox and volumes, container start.
func podStartOverhead(ctx context.Context, c client.Client, ns string) []time.Duration {
	var jobs batchv1.JobList
	var pods corev1.PodList
	if c.List(ctx, &jobs, client.InNamespace(ns)) != nil || c.List(ctx, &pods, client.InNamespace(ns)) != nil {
		return nil
	}
	created := map[string]time.Time{}
	for _, j := range jobs.Items {
		created[j.Labels[job.LabelUpdateUID]] = j.CreationTimestamp.Time
	}
	var ds []time.Duration
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			var started metav1.Time
			switch {
			case cs.State.Terminated != nil:
				started = cs.State.Terminated.StartedAt
			case cs.State.Running != nil:
				started = cs.State.Running.StartedAt
			}
			if c, ok := created[p.Labels[job.LabelUpdateUID]]; ok && !started.IsZero() {
				ds = append(ds, started.Sub(c))
			}
		}
	}
	return ds
}

func waitReady(ctx context.Context, c client.Client, ns string, names []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pending := map[string]bool{}
	for _, n := range names {
		pending[n] = true
	}
	for len(pending) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d Stacks not Ready after %s", len(pending), timeout)
		}
		var list pulumiv1.StackList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err == nil {
			for _, st := range list.Items {
				if apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionReady) {
					delete(pending, st.Name)
				}
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return nil
}

var secretYAML = `apiVersion: v1
kind: Secret
metadata:
  name: pass
stringData:
  passphrase: bench-only
`

// stateDir is where the Stacks keep their state: the runner Pod's scratch directory, or,
// in the manager, the namespace's own state directory on the manager's data volume (the
// local executor refuses a file:// backend elsewhere).
func stateDir(executor, ns string) string {
	if executor == "local" {
		return "/var/lib/stackwright/state/" + ns
	}
	return "/tmp/state"
}

// stackYAML is the bench program of `make bench` (a Random and two Files) with its state
// in a directory of its own under state: each Stack runs once, which is all that is
// measured.
func stackYAML(name, state string) string {
	return fmt.Sprintf(`apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: %[1]s
program:
  resources:
    token:
      type: stackwright-testing:index:Random
      properties:
        length: 16
    a:
      type: stackwright-testing:index:File
      properties:
        path: %[1]s/a.txt
        content: a
    b:
      type: stackwright-testing:index:File
      properties:
        path: %[1]s/b.txt
        content: ${token.result}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: %[1]s
spec:
  stack: bench
  programRef:
    name: %[1]s
  backend: file://%[2]s/%[1]s
  envRefs:
    PULUMI_CONFIG_PASSPHRASE:
      type: Secret
      secret:
        name: pass
        key: passphrase
    STACKWRIGHT_TESTING_ROOT:
      type: Literal
      literal:
        value: /tmp/files
`, name, state)
}

func render(rs []result, runs, parallel int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Executors on the one-node cluster, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "Generated by `make bench-executors` (bench/cmd/executors) against `make cluster` on this machine: the chart installed with each executor, maxConcurrentUpdates=%d; the bench program of `make bench` (a Random and two Files), each Stack's state in a file:// backend of its own (in the runner Pod's scratch directory; in the namespace's state directory on the manager's volume for the local executor). Single: %d Stacks applied one after another, each timed from `kubectl apply` to Ready as a watch of the namespace's Stacks first sees it. Fleet: Stacks applied at once, timed until all are Ready. Percentiles are nearest-rank; ratios compare figures of this run only.\n\n", parallel, runs)
	b.WriteString("| executor | single median | single p90 | fleet | fleet wall | fleet wall / (N × single median / parallelism) |\n| --- | --- | --- | --- | --- | --- |\n")
	var local, jobMedian time.Duration
	var overhead string
	for _, r := range rs {
		s := bench.Summarize(r.single)
		ideal := time.Duration(int64(s.P50) * int64(r.fleetN) / int64(parallel))
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %.2f |\n", r.executor, s.P50.Round(10*time.Millisecond), s.P90.Round(10*time.Millisecond),
			r.fleetN, r.fleet.Round(100*time.Millisecond), bench.Ratio(r.fleet, ideal))
		switch r.executor {
		case "local":
			local = s.P50
		case "job":
			jobMedian = s.P50
			if len(r.overhead) > 0 {
				o := bench.Summarize(r.overhead)
				overhead = fmt.Sprintf("\nJob created → runner container started, over %d runner Pods: median %s, p90 %s (object timestamps, whole seconds).\n", len(r.overhead), o.P50.Round(10*time.Millisecond), o.P90.Round(10*time.Millisecond))
			}
			if len(r.podStart) > 0 {
				o := bench.Summarize(r.podStart)
				overhead += fmt.Sprintf("\nJob created → runner container running, as the benchmark's watches first saw them, over %d runner Pods: median %s, p90 %s.\n", len(r.podStart), o.P50.Round(time.Millisecond), o.P90.Round(time.Millisecond))
			}
		}
	}
	if local > 0 && jobMedian > 0 {
		fmt.Fprintf(&b, "\nJob executor overhead per Update (single medians): %s (job / local = %.2f).\n", (jobMedian - local).Round(10*time.Millisecond), bench.Ratio(jobMedian, local))
	}
	b.WriteString(overhead)
	b.WriteString("\nWhere a single run's time goes: milestones of each Stack's first Update as the benchmark's watches first saw them (Stacks, Updates, Jobs, Pods of the namespace), nearest-rank over the single runs.\n\n")
	b.WriteString(renderPhases(rs))
	return b.String()
}
