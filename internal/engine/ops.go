package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"

	"github.com/stackwright/stackwright/internal/crashpoint"
)

func (x *run) up(ctx context.Context) (Result, error) {
	r := x.req
	if res, ok, err := x.recover(ctx); ok || err != nil {
		return res, err
	}
	if r.Refresh && r.ExpectNoChanges {
		if err := x.checkNoRefreshChanges(ctx); err != nil {
			return Result{}, err
		}
	}
	args := append([]string{"up", "--yes", "--skip-preview"}, x.messageFlag()...)
	if r.Refresh {
		args = append(args, "--refresh")
	}
	// With Refresh, checkNoRefreshChanges has judged the refresh; the update itself may
	// then apply the program's changes.
	if r.ExpectNoChanges && !r.Refresh {
		args = append(args, "--expect-no-changes")
	}
	args = append(args, x.replaceFlags()...)
	if r.ContinueOnError {
		args = append(args, "--continue-on-error")
	}
	if len(r.Plan) > 0 {
		path, cleanup, err := planFile()
		if err != nil {
			return Result{}, x.fail(ctx, "failed to update stack "+r.Stack, "", ClassTransient, err)
		}
		defer cleanup()
		if err := os.WriteFile(path, r.Plan, 0o600); err != nil {
			return Result{}, x.fail(ctx, "failed to update stack "+r.Stack, "", ClassTransient, fmt.Errorf("failed to write plan: %w", err))
		}
		// Hidden unless PULUMI_EXPERIMENTAL is set, but honoured either way.
		args = append(args, "--plan", path)
	}
	ev, stdout, err := x.operation(ctx, "up", args...)
	if err != nil {
		hint := ""
		switch {
		case isNoChangesExpected(err):
			hint = "the update changed resources and ExpectNoChanges forbids it"
		case len(r.Plan) > 0 && Classify(err) == ClassPlanInvalid:
			hint = "the update went beyond its approved plan (the program, its config or the resources changed since the preview)"
		}
		return Result{}, x.fail(ctx, "failed to update stack "+r.Stack, hint, "", err)
	}
	crashpoint.Hit(crashpoint.EngineUpApplied)
	changes := ev.changes()
	return x.withOutputs(ctx, ev.after, ev.haveAfter, Result{
		Changes:           changes,
		Steps:             ev.steps,
		Permalink:         permalink(stdout),
		Message:           "up succeeded: " + describe(changes, false),
		PendingOperations: pendingOperations(stdout),
	})
}

// replaceFlags asks an up or preview to replace the request's resources.
func (x *run) replaceFlags() []string {
	flags := make([]string, 0, len(x.req.Replace))
	for _, urn := range x.req.Replace {
		flags = append(flags, "--replace="+urn)
	}
	return flags
}

// planFile returns a path for an update plan in a fresh private directory, and the
// function that removes it.
func planFile() (string, func(), error) {
	dir, err := os.MkdirTemp("", "stackwright-plan-")
	if err != nil {
		return "", nil, fmt.Errorf("failed to create plan directory: %w", err)
	}
	return filepath.Join(dir, "plan.json"), func() { _ = os.RemoveAll(dir) }, nil
}

// checkNoRefreshChanges implements PKO's expectNoRefreshChanges: a refresh preview with
// --expect-no-changes, so that drift stops the run while neither the resources nor the
// state have changed. (`up --refresh --expect-no-changes` would check the whole update,
// after applying it.)
func (x *run) checkNoRefreshChanges(ctx context.Context) error {
	r := x.req
	ev, _, err := x.operation(ctx, "refresh preview (expect no changes)", "refresh", "--preview-only", "--expect-no-changes")
	const hint = "the refresh before the update found changes and expectNoRefreshChanges forbids them; nothing was changed"
	switch {
	case err != nil && isNoChangesExpected(err):
		return x.fail(ctx, "failed to update stack "+r.Stack, hint, ClassPermanent, err)
	case err != nil:
		return x.fail(ctx, "failed to refresh stack "+r.Stack, "", "", err)
	case HasChanges(ev.changes()):
		// Belt and braces: should a CLI stop enforcing the flag in preview-only mode.
		return x.fail(ctx, "failed to update stack "+r.Stack, hint+" ("+describe(ev.changes(), true)+")",
			ClassPermanent, nil)
	}
	return nil
}

func (x *run) preview(ctx context.Context) (Result, error) {
	r := x.req
	args := append([]string{"preview"}, x.messageFlag()...)
	if r.Refresh {
		args = append(args, "--refresh")
	}
	if r.ExpectNoChanges {
		args = append(args, "--expect-no-changes")
	}
	args = append(args, x.replaceFlags()...)
	var path string
	if r.SavePlan {
		p, cleanup, err := planFile()
		if err != nil {
			return Result{}, x.fail(ctx, "failed to preview stack "+r.Stack, "", ClassTransient, err)
		}
		defer cleanup()
		path = p
		args = append(args, "--save-plan", path)
	}
	ev, stdout, err := x.operation(ctx, "preview", args...)
	if err != nil {
		return Result{}, x.fail(ctx, "failed to preview stack "+r.Stack, "", "", err)
	}
	changes := ev.changes()
	res := Result{
		Changes:   changes,
		Steps:     ev.steps,
		Permalink: permalink(stdout),
		Message:   "preview succeeded: " + describe(changes, true),
	}
	if path != "" {
		if res.Plan, err = os.ReadFile(path); err != nil {
			return Result{}, x.fail(ctx, "failed to preview stack "+r.Stack, "the CLI saved no plan", ClassPermanent, err)
		}
	}
	return x.withOutputs(ctx, ev.before, ev.haveBefore, res)
}

func (x *run) drift(ctx context.Context) (Result, error) {
	ev, stdout, err := x.operation(ctx, "refresh preview (drift check)", "refresh", "--preview-only")
	if err != nil {
		return Result{}, x.fail(ctx, "failed to check stack "+x.req.Stack+" for drift", "", "", err)
	}
	changes := ev.changes()
	msg := "no drift: " + describe(changes, true)
	if HasChanges(changes) {
		msg = "drift detected: " + describe(changes, true)
	}
	return x.withOutputs(ctx, ev.before, ev.haveBefore, Result{Changes: changes, Permalink: permalink(stdout), Message: msg})
}

func (x *run) refresh(ctx context.Context) (Result, error) {
	r := x.req
	args := append([]string{"refresh", "--yes", "--skip-preview"}, x.messageFlag()...)
	if r.ExpectNoChanges {
		args = append(args, "--expect-no-changes")
	}
	ev, stdout, err := x.operation(ctx, "refresh", args...)
	if err != nil {
		return Result{}, x.fail(ctx, "failed to refresh stack "+r.Stack, "", "", err)
	}
	changes := ev.changes()
	return x.withOutputs(ctx, ev.after, ev.haveAfter, Result{
		Changes:   changes,
		Permalink: permalink(stdout),
		Message:   "refresh succeeded: " + describe(changes, false),
	})
}

func (x *run) destroy(ctx context.Context) (Result, error) {
	r := x.req
	args := append([]string{"destroy", "--yes", "--skip-preview"}, x.messageFlag()...)
	if r.Refresh {
		args = append(args, "--refresh")
	}
	if r.RemoveStack {
		args = append(args, "--remove")
	}
	if r.ContinueOnError {
		args = append(args, "--continue-on-error")
	}
	ev, stdout, err := x.operation(ctx, "destroy", args...)
	if err != nil {
		return Result{}, x.fail(ctx, "failed to destroy stack "+r.Stack, "", "", err)
	}
	changes := ev.changes()
	msg := "destroy succeeded: " + describe(changes, false)
	if r.RemoveStack {
		msg += "; stack removed"
	}
	return Result{
		Outputs:   map[string]Output{},
		Changes:   changes,
		Permalink: permalink(stdout),
		Message:   msg,
	}, nil
}

// withOutputs adds the stack's outputs, as the event log has them, to a result.
func (x *run) withOutputs(ctx context.Context, m map[string]any, have bool, res Result) (Result, error) {
	outs, err := x.outputs(ctx, m, have)
	if err != nil {
		return Result{}, err
	}
	res.Outputs = outs
	return res, nil
}

func permalink(stdout string) string {
	link, err := auto.GetPermalink(stdout)
	if err != nil {
		return "" // DIY backends print none
	}
	return strings.TrimSpace(link)
}

func isNoChangesExpected(err error) bool {
	return strings.Contains(err.Error(), "no changes were expected")
}

// HasChanges reports whether changes (a Result's Changes) contain anything but unchanged
// or read resources, the way the CLI's --expect-no-changes judges them.
func HasChanges(changes map[string]int) bool {
	for op, n := range changes {
		switch apitype.OpType(op) {
		case apitype.OpSame, apitype.OpRead, apitype.OpReadDiscard, apitype.OpReadReplacement:
		default:
			if n > 0 {
				return true
			}
		}
	}
	return false
}

// opWords orders and names resource operations in summaries: past tense for what an
// operation did, future for what a preview would do.
var opWords = []struct{ op, done, planned string }{
	{"create", "created", "to create"},
	{"update", "updated", "to update"},
	{"replace", "replaced", "to replace"},
	{"delete", "deleted", "to delete"},
	{"import", "imported", "to import"},
	{"same", "unchanged", "unchanged"},
}

// describe renders change counts as "2 created, 1 updated, 3 unchanged".
func describe(changes map[string]int, planned bool) string {
	var parts []string
	known := map[string]bool{}
	for _, w := range opWords {
		known[w.op] = true
		if n := changes[w.op]; n > 0 {
			word := w.done
			if planned {
				word = w.planned
			}
			parts = append(parts, fmt.Sprintf("%d %s", n, word))
		}
	}
	var other []string
	for op, n := range changes {
		if !known[op] && n > 0 {
			other = append(other, fmt.Sprintf("%d %s", n, op))
		}
	}
	slices.Sort(other)
	parts = append(parts, other...)
	if len(parts) == 0 {
		return "no resources"
	}
	return strings.Join(parts, ", ")
}
