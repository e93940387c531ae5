package engine

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stepKeys reduces steps to what a plan constrains: which resource gets which operation,
// touching which properties. The engine runs steps in parallel: their order is not.
func stepKeys(steps []Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Op+" "+s.URN+" "+fmt.Sprint(s.Changed))
	}
	slices.Sort(out)
	return out
}

// The pinned CLI (v3.259.0) takes `preview --save-plan` (a [PREVIEW] flag) and `up --plan`
// (hidden unless PULUMI_EXPERIMENTAL is set) without PULUMI_EXPERIMENTAL; this pins that.
func TestEngine_Run_UpWithPlanAppliesExactlyThePreviewedSteps(t *testing.T) {
	t.Parallel()
	f, _ := upFiles(t)
	if v, ok := f.env.EnvVars()["PULUMI_EXPERIMENTAL"]; ok {
		t.Fatalf("the fixture sets PULUMI_EXPERIMENTAL=%s; the plan flags must work without it", v)
	}
	ctx := testContext(t)
	const canary = "plan-canary-7f3c1e"
	config := map[string]ConfigValue{
		"greeting": {Value: jsonValue(t, "hi")},
		"password": {Value: jsonValue(t, canary), Secret: true},
	}

	p := f.request(OpPreview)
	p.SavePlan, p.Config = true, config
	preview := f.mustRun(ctx, p)
	if len(preview.Plan) == 0 {
		t.Fatal("the preview returned no plan")
	}
	if bytes.Contains(preview.Plan, []byte(canary)) {
		t.Error("the saved plan holds a secret config value in clear")
	}
	var updates []string
	for _, s := range preview.Steps {
		updates = append(updates, s.Op+" "+s.Type+" "+fmt.Sprint(s.Changed))
	}
	want := []string{
		"update stackwright-testing:index:File [content]",
		"update stackwright-testing:index:File [content]",
	}
	if diff := cmp.Diff(want, updates); diff != "" {
		t.Errorf("previewed steps (-want +got):\n%s", diff)
	}
	f.requireContent("a.txt", "hello")

	u := f.request(OpUp)
	u.Plan, u.Config = preview.Plan, config
	up := f.mustRun(ctx, u)
	if diff := cmp.Diff(stepKeys(preview.Steps), stepKeys(up.Steps)); diff != "" {
		t.Errorf("applied steps differ from the previewed ones (-previewed +applied):\n%s", diff)
	}
	f.requireContent("a.txt", "hi")
	f.requireContent("b.txt", "hi world")
}

func TestEngine_Run_UpWithStalePlanFailsAsPlanInvalidAndChangesNothing(t *testing.T) {
	t.Parallel()
	f, _ := upFiles(t)
	ctx := testContext(t)

	p := f.request(OpPreview)
	p.SavePlan, p.Config = true, map[string]ConfigValue{"greeting": {Value: jsonValue(t, "hi")}}
	preview := f.mustRun(ctx, p)

	// The config moved on after the preview: the plan does not allow the new content.
	u := f.request(OpUp)
	u.Plan, u.Config = preview.Plan, map[string]ConfigValue{"greeting": {Value: jsonValue(t, "hey")}}
	_, err := f.eng.Run(ctx, u)
	if got := Classify(err); got != ClassPlanInvalid {
		t.Fatalf("up with a stale plan: class %q (%v); want %q", got, err, ClassPlanInvalid)
	}
	f.requireContent("a.txt", "hello")
	f.requireContent("b.txt", "hello world")
}

func TestEngine_Run_RefusesPlansOnOtherOperations(t *testing.T) {
	t.Parallel()
	f := newFixture(t, filesProgram)
	ctx := testContext(t)
	for name, r := range map[string]Request{
		"SavePlanOnUp":    {Operation: OpUp, SavePlan: true},
		"PlanOnPreview":   {Operation: OpPreview, Plan: []byte("{}")},
		"PlanOnDestroy":   {Operation: OpDestroy, Plan: []byte("{}")},
		"SavePlanOnDrift": {Operation: OpDrift, SavePlan: true},
	} {
		r.WorkDir, r.Stack, r.Env = f.work, "dev", f.env.EnvVars()
		if _, err := f.eng.Run(ctx, r); Classify(err) != ClassPermanent {
			t.Errorf("%s: %v (class %q); want a permanent refusal", name, err, Classify(err))
		}
	}
}
