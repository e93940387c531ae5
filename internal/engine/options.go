package engine

import (
	"io"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
)

// noColor keeps ANSI escapes out of logs and error messages.
const noColor = "never"

// cliOptions are the flags of one CLI invocation besides its verb. x.options fills in
// those every operation gets, so that no operation can miss one; each operation then sets
// the few that are its own.
type cliOptions struct {
	out, errw        io.Writer
	color            string
	userAgent        string
	targets          []string
	targetDependents bool
	message          string
	refresh          bool
	expectNoChanges  bool
	// hideSecrets is set where the CLI prints a summary with the stack's config: that
	// config is not ours to decrypt.
	hideSecrets bool
	remove      bool
	runProgram  bool
}

// options starts the options of one CLI invocation, announced in the log as step, with
// what every operation gets: the log as progress streams, no colour, Stackwright's user
// agent and the request's targets. The function it also returns flushes the streams; it
// must be called when the invocation returns.
func (x *run) options(step string) (cliOptions, func()) {
	out, errw, flush := x.streams(step)
	return cliOptions{
		out: out, errw: errw, color: noColor, userAgent: x.userAgent(),
		targets: x.req.Targets, targetDependents: x.req.TargetDependents,
		runProgram: x.req.RunProgram,
	}, flush
}

// optionSet holds one Automation API package's constructors for the fields of cliOptions.
// Each operation family has an option type of its own, so each needs its own set; a nil
// constructor is a flag the family lacks, and no operation of that family sets its field.
type optionSet[O any] struct {
	progressStreams, errorProgressStreams              func(...io.Writer) O
	color, userAgent, message                          func(string) O
	target                                             func([]string) O
	targetDependents, refresh, expectNoChanges, remove func() O
	showSecrets, runProgram                            func(bool) O
}

var (
	upOptions = optionSet[optup.Option]{
		progressStreams: optup.ProgressStreams, errorProgressStreams: optup.ErrorProgressStreams,
		color: optup.Color, userAgent: optup.UserAgent, message: optup.Message,
		target: optup.Target, targetDependents: optup.TargetDependents,
		refresh: optup.Refresh, expectNoChanges: optup.ExpectNoChanges, showSecrets: optup.ShowSecrets,
		runProgram: optup.RunProgram,
	}
	previewOptions = optionSet[optpreview.Option]{
		progressStreams: optpreview.ProgressStreams, errorProgressStreams: optpreview.ErrorProgressStreams,
		color: optpreview.Color, userAgent: optpreview.UserAgent, message: optpreview.Message,
		target: optpreview.Target, targetDependents: optpreview.TargetDependents,
		refresh: optpreview.Refresh, expectNoChanges: optpreview.ExpectNoChanges,
		runProgram: optpreview.RunProgram,
	}
	// refreshOptions serve refreshes and refresh previews (drift checks).
	refreshOptions = optionSet[optrefresh.Option]{
		progressStreams: optrefresh.ProgressStreams, errorProgressStreams: optrefresh.ErrorProgressStreams,
		color: optrefresh.Color, userAgent: optrefresh.UserAgent, message: optrefresh.Message,
		target: optrefresh.Target, targetDependents: optrefresh.TargetDependents,
		expectNoChanges: optrefresh.ExpectNoChanges, showSecrets: optrefresh.ShowSecrets,
		runProgram: optrefresh.RunProgram,
	}
	destroyOptions = optionSet[optdestroy.Option]{
		progressStreams: optdestroy.ProgressStreams, errorProgressStreams: optdestroy.ErrorProgressStreams,
		color: optdestroy.Color, userAgent: optdestroy.UserAgent, message: optdestroy.Message,
		target: optdestroy.Target, targetDependents: optdestroy.TargetDependents,
		refresh: optdestroy.Refresh, showSecrets: optdestroy.ShowSecrets, remove: optdestroy.Remove,
		runProgram: optdestroy.RunProgram,
	}
)

// build translates o into set's options. A field at its zero value adds no option, so the
// CLI gets no flag for it.
func build[O any](set optionSet[O], o cliOptions) []O {
	opts := []O{
		set.progressStreams(o.out), set.errorProgressStreams(o.errw),
		set.color(o.color), set.userAgent(o.userAgent),
	}
	if o.hideSecrets {
		opts = append(opts, set.showSecrets(false))
	}
	if o.refresh {
		opts = append(opts, set.refresh())
	}
	if o.expectNoChanges {
		opts = append(opts, set.expectNoChanges())
	}
	if len(o.targets) > 0 {
		opts = append(opts, set.target(o.targets))
	}
	if o.targetDependents {
		opts = append(opts, set.targetDependents())
	}
	if o.message != "" {
		opts = append(opts, set.message(o.message))
	}
	if o.remove {
		opts = append(opts, set.remove())
	}
	if o.runProgram {
		opts = append(opts, set.runProgram(true))
	}
	return opts
}
