package bench

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// A re-run through the reconcile-request annotation is the manager's steady-state update:
// the stack exists, its program and config are unchanged, and the engine runs one
// `pulumi up` on it. Its floor is the CLI's steady update.

// requestReconcile sets a Stack's reconcile-request annotation to value.
func (b *bench) requestReconcile(ctx context.Context, ns, name, value string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, pulumiv1.ReconcileRequestAnnotation, value)
	st := &pulumiv1.Stack{}
	st.Namespace, st.Name = ns, name
	if err := b.cluster.client.Patch(ctx, st, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("failed to request a reconcile of Stack %s/%s: %w", ns, name, err)
	}
	return nil
}

// reranFor reports whether s is Ready after a successful update run for the reconcile
// request value.
func reranFor(value string) func(*pulumiv1.Stack) bool {
	return func(s *pulumiv1.Stack) bool {
		lu := s.Status.LastUpdate
		return isReady(s) && lu != nil && lu.ReconcileRequest == value && lu.State == pulumiv1.UpdateStateSucceeded
	}
}

// steadyFloor is the CLI's median steady-state update (0 without a CLI floor).
func (b *bench) steadyFloor() time.Duration {
	if b.floor == nil || b.floor.CLI == nil {
		return 0
	}
	return Percentile(b.floor.CLI.Steady.Runs, 50)
}

// rerun requests a reconcile of one Ready Stack and returns how long it took to be Ready
// again for that request.
func (b *bench) rerun(ctx context.Context, ns, name string) (time.Duration, error) {
	value := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	t0 := time.Now()
	if err := b.requestReconcile(ctx, ns, name, value); err != nil {
		return 0, err
	}
	st, ok := b.track.waitStack(ctx, ns, name, 5*time.Minute, reranFor(value))
	if !ok {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		desc := "never seen"
		if st != nil {
			desc = describeStack(st)
		}
		return 0, fmt.Errorf("stack %s/%s not Ready for reconcile request %s after 5 minutes: %s", ns, name, value, desc)
	}
	return time.Since(t0), nil
}

// runResync re-runs the whole Ready fleet at once through the reconcile-request annotation
// and waits until every Stack is Ready for it: N steady-state updates.
func (b *bench) runResync(ctx context.Context) error {
	if !b.fleetReady {
		b.rep.add("Fleet re-run (steady-state updates)", "Skipped: the fleet did not become Ready.\n")
		return nil
	}
	n, par := len(b.fleetNames), b.cfg.Parallelism
	steady := b.steadyFloor()
	value := fmt.Sprintf("bench-resync-%d", time.Now().UnixNano())
	m := b.measure(ctx)
	defer m.release()
	t0 := time.Now()
	b.say("resync: requesting a reconcile of %d Stacks", n)
	if err := b.forAll(ctx, "annotate", b.fleetNames, func(name string) error {
		return b.requestReconcile(ctx, nsFleet, name, value)
	}); err != nil {
		return err
	}
	annotated := time.Since(t0)
	// Unlike the fleet's, the ideal here is of steady updates, and a missing floor is
	// guessed at 10 s a run.
	timeout := 4*time.Duration(n)*steady/time.Duration(par) + 5*time.Minute
	if steady == 0 {
		timeout = time.Duration(n)*10*time.Second/time.Duration(par) + 5*time.Minute
	}
	progress := func(done int) {
		b.say("resync: %d/%d re-run after %s; manager %s", done, n, secs(time.Since(t0)), procLine(b.mgr.pid()))
	}
	rerun := reranFor(value)
	done := b.track.waitStacks(ctx, nsFleet, b.fleetNames, timeout, progressEvery, progress,
		func(st *stackSeen) bool { return st.last != nil && rerun(st.last) })
	wall := time.Since(t0)
	m.end(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	all := fmt.Sprintf("%s (%d/%d)", secs(wall), done, n)
	if done < n {
		all = fmt.Sprintf("not reached: %d/%d after %s", done, n, secs(wall))
	}
	rows := [][]string{
		{"Stacks re-run", fmt.Sprint(n)},
		{"annotating all of them", secs(annotated)},
		{"first annotation → all Ready for it", all},
	}
	rows = append(rows, b.idealRows("ideal: N × CLI steady update median / parallelism", wall, n, steady)...)
	rows = append(rows, b.steadyThroughputRows(wall, n)...)
	rows = append(rows, m.costRows()...)
	body := fmt.Sprintf("The Ready fleet, every Stack given a new `%s` annotation at once: one steady-state "+
		"update each (stack exists, program and config unchanged). `--max-concurrent-updates %d`.\n\n",
		pulumiv1.ReconcileRequestAnnotation, par) + table([]string{"re-run", ""}, rows)
	b.rep.add(fmt.Sprintf("Fleet re-run (N=%d steady-state updates)", n), body)
	return nil
}
