package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
)

func (x *run) up(ctx context.Context, stack auto.Stack) (Result, error) {
	r := x.req
	name := r.Stack
	if r.Refresh && r.ExpectNoChanges {
		if err := x.checkNoRefreshChanges(ctx, stack); err != nil {
			return Result{}, err
		}
	}
	o, flush := x.options("up")
	o.hideSecrets, o.refresh, o.message = true, r.Refresh, r.Message
	// With Refresh, checkNoRefreshChanges has judged the refresh; the update itself may
	// then apply the program's changes.
	o.expectNoChanges = r.ExpectNoChanges && !r.Refresh
	res, err := stack.Up(ctx, build(upOptions, o)...)
	flush()
	if err != nil {
		hint := ""
		if isNoChangesExpected(err) {
			hint = "the update changed resources and ExpectNoChanges forbids it"
		}
		return Result{}, x.fail(ctx, "failed to update stack "+name, hint, "", err)
	}
	changes := summaryChanges(res.Summary)
	return Result{
		Outputs:   outputs(res.Outputs),
		Changes:   changes,
		Permalink: permalink(res.StdOut),
		Message:   "up succeeded: " + describe(changes, false),
	}, nil
}

// checkNoRefreshChanges implements PKO's expectNoRefreshChanges: a refresh preview with
// --expect-no-changes, so that drift stops the run while neither the resources nor the
// state have changed. (`up --refresh --expect-no-changes` would check the whole update,
// after applying it.)
func (x *run) checkNoRefreshChanges(ctx context.Context, stack auto.Stack) error {
	r := x.req
	o, flush := x.options("refresh preview (expect no changes)")
	o.expectNoChanges = true
	res, err := stack.PreviewRefresh(ctx, build(refreshOptions, o)...)
	flush()
	const hint = "the refresh before the update found changes and expectNoRefreshChanges forbids them; nothing was changed"
	switch {
	case err != nil && isNoChangesExpected(err):
		return x.fail(ctx, "failed to update stack "+r.Stack, hint, ClassPermanent, err)
	case err != nil:
		return x.fail(ctx, "failed to refresh stack "+r.Stack, "", "", err)
	case HasChanges(previewChanges(res.ChangeSummary)):
		// Belt and braces: should a CLI stop enforcing the flag in preview-only mode.
		return x.fail(ctx, "failed to update stack "+r.Stack, hint+" ("+describe(previewChanges(res.ChangeSummary), true)+")",
			ClassPermanent, nil)
	}
	return nil
}

func (x *run) preview(ctx context.Context, stack auto.Stack) (Result, error) {
	r := x.req
	o, flush := x.options("preview")
	o.refresh, o.expectNoChanges, o.message = r.Refresh, r.ExpectNoChanges, r.Message
	res, err := stack.Preview(ctx, build(previewOptions, o)...)
	flush()
	if err != nil {
		return Result{}, x.fail(ctx, "failed to preview stack "+r.Stack, "", "", err)
	}
	changes := previewChanges(res.ChangeSummary)
	return x.withOutputs(ctx, stack, Result{
		Changes:   changes,
		Permalink: permalink(res.StdOut),
		Message:   "preview succeeded: " + describe(changes, true),
	})
}

func (x *run) drift(ctx context.Context, stack auto.Stack) (Result, error) {
	r := x.req
	o, flush := x.options("refresh preview (drift check)")
	res, err := stack.PreviewRefresh(ctx, build(refreshOptions, o)...)
	flush()
	if err != nil {
		return Result{}, x.fail(ctx, "failed to check stack "+r.Stack+" for drift", "", "", err)
	}
	changes := previewChanges(res.ChangeSummary)
	msg := "no drift: " + describe(changes, true)
	if HasChanges(changes) {
		msg = "drift detected: " + describe(changes, true)
	}
	return x.withOutputs(ctx, stack, Result{Changes: changes, Permalink: permalink(res.StdOut), Message: msg})
}

func (x *run) refresh(ctx context.Context, stack auto.Stack) (Result, error) {
	r := x.req
	o, flush := x.options("refresh")
	o.hideSecrets, o.expectNoChanges, o.message = true, r.ExpectNoChanges, r.Message
	res, err := stack.Refresh(ctx, build(refreshOptions, o)...)
	flush()
	if err != nil {
		return Result{}, x.fail(ctx, "failed to refresh stack "+r.Stack, "", "", err)
	}
	changes := summaryChanges(res.Summary)
	return x.withOutputs(ctx, stack, Result{
		Changes:   changes,
		Permalink: permalink(res.StdOut),
		Message:   "refresh succeeded: " + describe(changes, false),
	})
}

func (x *run) destroy(ctx context.Context, stack auto.Stack) (Result, error) {
	r := x.req
	o, flush := x.options("destroy")
	o.hideSecrets, o.refresh, o.message, o.remove = true, r.Refresh, r.Message, r.RemoveStack
	res, err := stack.Destroy(ctx, build(destroyOptions, o)...)
	flush()
	if err != nil {
		return Result{}, x.fail(ctx, "failed to destroy stack "+r.Stack, "", "", err)
	}
	changes := summaryChanges(res.Summary)
	msg := "destroy succeeded: " + describe(changes, false)
	if r.RemoveStack {
		msg += "; stack removed"
	}
	return Result{
		Outputs:   map[string]Output{},
		Changes:   changes,
		Permalink: permalink(res.StdOut),
		Message:   msg,
	}, nil
}

// withOutputs adds the stack's current outputs to a result.
func (x *run) withOutputs(ctx context.Context, stack auto.Stack, res Result) (Result, error) {
	outs, err := stack.Outputs(ctx)
	if err != nil {
		return Result{}, x.fail(ctx, "failed to read outputs of stack "+x.req.Stack, "", "", err)
	}
	res.Outputs = outputs(outs)
	return res, nil
}

func outputs(m auto.OutputMap) map[string]Output {
	out := make(map[string]Output, len(m))
	for k, v := range m {
		out[k] = Output{Value: v.Value, Secret: v.Secret}
	}
	return out
}

func summaryChanges(s auto.UpdateSummary) map[string]int {
	out := map[string]int{}
	if s.ResourceChanges != nil {
		for op, n := range *s.ResourceChanges {
			out[op] = n
		}
	}
	return out
}

func previewChanges(m map[apitype.OpType]int) map[string]int {
	out := make(map[string]int, len(m))
	for op, n := range m {
		out[string(op)] = n
	}
	return out
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
