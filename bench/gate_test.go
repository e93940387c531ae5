package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/policy"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// gatePolicies are what a platform team would put in front of a Stack: the samples' two.
var gatePolicies = []policy.Source{
	{Name: "Policy bench/protected", Enforcement: v1alpha1.EnforcementMandatory, Version: "protected/1", Rego: `package protected

deny contains msg if {
	some step in input.steps
	step.op in {"delete", "replace"}
	step.protected
	msg := sprintf("%s would %s protected resource %s", [input.stack.name, step.op, step.urn])
}
`},
	{Name: "ClusterPolicy owners", Enforcement: v1alpha1.EnforcementAdvisory, Version: "owners/1", Rego: `package owners

deny contains "production Stacks need an owner label" if {
	not input.stack.labels.owner
}

deny contains msg if {
	some step in input.steps
	step.op == "create"
	is_object(step.inputs.tags)
	not step.inputs.tags.team
	msg := sprintf("%s has no team tag", [step.urn])
}
`},
}

// BenchmarkGate_PreviewPolicyVsUp measures what a gated change costs (approval: Manual, or
// policies selecting the Stack) against the physical floor, all in one run: each iteration
// changes the bench program's config and applies it four ways, on four stacks:
//
//   - floor: `pulumi up --skip-preview --yes -c message=…` straight from the CLI;
//   - up: an ungated change through internal/engine (what a Stack without policies runs);
//   - preview+policy: the gate's preview with --save-plan, then the two sample policies
//     judging its steps in process;
//   - gated: preview+policy, then the up held to the saved plan: a whole gated change.
//
// Reported per change: the floor's median seconds, and each path's median over the floor's.
// Run with `make bench-gate` (10 changes).
func BenchmarkGate_PreviewPolicyVsUp(b *testing.B) {
	g := newGateBench(b)
	var floor, up, judged, gated []time.Duration
	timed := func(into *[]time.Duration, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(start))
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		msg := fmt.Sprintf("change %d", i)
		timed(&floor, func() error { return g.cli("up", "--skip-preview", "--yes", "-s", "cli", "-c", "message="+msg) })
		timed(&up, func() error { _, err := g.run("up", engine.Request{Operation: engine.OpUp}, msg); return err })
		timed(&judged, func() error { _, err := g.previewAndJudge(msg + " (preview)"); return err })
		// The whole gated change: a fresh preview and verdict, then the up held to its plan.
		timed(&gated, func() error {
			res, err := g.previewAndJudge(msg)
			if err != nil {
				return err
			}
			_, err = g.run("gated", engine.Request{Operation: engine.OpUp, Plan: res.Plan}, msg)
			return err
		})
	}
	b.StopTimer()
	base := Percentile(floor, 50).Seconds()
	b.ReportMetric(base, "floor-s/change")
	b.ReportMetric(Percentile(up, 50).Seconds()/base, "up/floor")
	b.ReportMetric(Percentile(judged, 50).Seconds()/base, "preview+policy/floor")
	b.ReportMetric(Percentile(gated, 50).Seconds()/base, "gated-change/floor")
	b.ReportMetric(float64(Percentile(g.evals, 50).Microseconds())/1000, "policy-ms/change")
	b.ReportMetric(0, "ns/op")
}

// gateBench runs the gate benchmark's paths on one project, a stack each.
type gateBench struct {
	ctx  context.Context
	f    *floorEnv
	work string
	eval *policy.Evaluator
	// ready says which stacks exist, as the Stack controller tells the engine.
	ready map[string]bool
	cli   func(args ...string) error
	// evals are the policy evaluations' times.
	evals []time.Duration
}

// newGateBench writes the project and brings every stack to the first message before
// anything is timed.
func newGateBench(b *testing.B) *gateBench {
	root, err := repo.Root()
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(root, "bin")
	f, err := newFloorEnv(bin, b.TempDir(), ProgramFiles)
	if err != nil {
		b.Fatal(err)
	}
	g := &gateBench{ctx: b.Context(), f: f, work: filepath.Join(f.dir, "gate"), eval: policy.NewEvaluator(), ready: map[string]bool{}}
	if err := writeBenchProject(g.work, ProgramFiles); err != nil {
		b.Fatal(err)
	}
	g.cli = f.pulumiCLI(g.ctx, bin, g.work, f.dir)
	if err := g.cli("stack", "init", "cli"); err != nil {
		b.Fatal(err)
	}
	if err := g.cli("up", "--skip-preview", "--yes", "-s", "cli", "-c", "message=start"); err != nil {
		b.Fatal(err)
	}
	for _, s := range []string{"up", "gated"} {
		if _, err := g.run(s, engine.Request{Operation: engine.OpUp}, "start"); err != nil {
			b.Fatal(err)
		}
		g.ready[s] = true
	}
	_ = g.eval.Evaluate(g.ctx, gatePolicies, policy.Input{}) // compiled once, as a manager keeps them
	return g
}

// run runs r on stack with config message msg through internal/engine.
func (g *gateBench) run(stack string, r engine.Request, msg string) (engine.Result, error) {
	v, _ := json.Marshal(msg)
	// As for a Stack whose last update succeeded: the engine goes straight to the operation.
	r.WorkDir, r.Stack, r.CreateStack, r.StackExists, r.Env = g.work, stack, true, g.ready[stack], g.f.runEnv(stack)
	r.Config = map[string]engine.ConfigValue{"message": {Value: v}}
	tail := engine.NewTail(8192)
	r.Log = tail
	res, err := g.f.eng.Run(g.ctx, r)
	if err != nil {
		return res, fmt.Errorf("%s %s: %s\n%s", r.Operation, stack, engine.Message(err), tail.String())
	}
	return res, nil
}

// previewAndJudge is the gate: a preview saving its plan, its steps judged by the policies.
func (g *gateBench) previewAndJudge(msg string) (engine.Result, error) {
	res, err := g.run("gated", engine.Request{Operation: engine.OpPreview, SavePlan: true}, msg)
	if err != nil {
		return res, err
	}
	in := policy.Input{Stack: policy.Stack{Name: "gated", Namespace: "bench", Revision: msg}, Steps: res.Steps}
	start := time.Now()
	pr := g.eval.Evaluate(g.ctx, gatePolicies, in)
	g.evals = append(g.evals, time.Since(start))
	if len(pr.Errors) > 0 || len(pr.Evaluated) != len(gatePolicies) {
		return res, fmt.Errorf("policies: %+v", pr)
	}
	return res, nil
}
