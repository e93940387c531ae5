package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/stackwright/stackwright/internal/crashpoint"
)

// noColor keeps ANSI escapes out of logs and error messages.
const noColor = "never"

// execKind is what the backend records as the kind of client that ran an update, the
// same as the Automation API's.
const execKind = "auto.local"

var (
	// missingStackErr is the CLI's answer for a stack the backend does not have.
	missingStackErr = regexp.MustCompile(`no stack named .* found`)
	// stackExistsErr is `stack init`'s answer for one it has.
	stackExistsErr = regexp.MustCompile(`stack .* already exists`)
)

// cli runs one pulumi command for the run, announced in the log as step, and returns its
// stdout. Its output is streamed to the log, except the stdout of a quiet command (one
// that prints the stack's secrets), which is not in its error either.
func (x *run) cli(ctx context.Context, step string, stdin io.Reader, quiet bool, args ...string) (string, error) {
	x.log.println("--- " + step)
	errw := x.log.stream()
	defer errw.Flush()
	var outs []io.Writer
	if !quiet {
		out := x.log.stream()
		defer out.Flush()
		outs = append(outs, out)
	}
	stdout, stderr, code, cpu, err := x.cmd.run(ctx, x.req.WorkDir, stdin, outs, []io.Writer{errw}, x.envList(), args...)
	x.cpu += cpu
	if err != nil {
		shown := stdout
		if quiet {
			shown = ""
		}
		return stdout, &cliError{err: fmt.Errorf("failed to run pulumi %s: %w", args[0], err), stdout: shown, stderr: stderr, code: code}
	}
	return stdout, nil
}

// envList is the environment of a CLI invocation: PULUMI_HOME, the run's variables, and
// PULUMI_DEBUG_COMMANDS, without which the CLI has no --event-log.
func (x *run) envList() []string {
	env := []string{"PULUMI_DEBUG_COMMANDS=true"}
	if x.home != "" {
		env = append(env, "PULUMI_HOME="+x.home)
	}
	for _, k := range slices.Sorted(maps.Keys(x.env)) {
		env = append(env, k+"="+x.env[k])
	}
	return env
}

// operation runs one engine operation (verb and its own flags; the stack, the client's
// identity and the request's common flags are added here) with an event log, from which
// the change counts and the stack's outputs come: the operation is the run's only CLI
// process for them.
func (x *run) operation(ctx context.Context, step string, args ...string) (opEvents, string, error) {
	dir, err := os.MkdirTemp("", "stackwright-events-")
	if err != nil {
		return opEvents{}, "", fmt.Errorf("failed to create event log directory: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "events.jsonl")
	args = append(args, "--stack", x.req.Stack, "--event-log", path,
		"--exec-kind="+execKind, "--exec-agent="+x.userAgent(), "--color="+noColor)
	for _, t := range x.req.Targets {
		args = append(args, "--target="+t)
	}
	if x.req.TargetDependents {
		args = append(args, "--target-dependents")
	}
	if x.req.RunProgram {
		args = append(args, "--run-program=true")
	}
	if x.req.Parallel > 0 {
		args = append(args, "--parallel="+strconv.Itoa(int(x.req.Parallel)))
	}
	stdout, err := x.cli(ctx, step, nil, false, args...)
	crashpoint.Hit(crashpoint.EngineCLIFinished)
	ev, rerr := readEvents(path)
	if err == nil {
		err = rerr
	}
	return ev, stdout, err
}

// outputs returns the stack's outputs as an operation's event log has them (m, when have
// says the log carried them). The log never holds a secret's value: when there are secret
// outputs, they are read from the state of a file:// backend (stateSecrets) or, elsewhere,
// by one more CLI call.
func (x *run) outputs(ctx context.Context, m map[string]any, have bool) (map[string]Output, error) {
	if !have {
		return x.backendOutputs(ctx)
	}
	outs, secrets := logOutputs(m)
	if len(secrets) == 0 {
		return outs, nil
	}
	if x.crypters != nil {
		if plain, ok := x.stateSecrets(ctx, secrets); ok {
			for _, k := range secrets {
				outs[k] = Output{Value: plain[k], Secret: true}
			}
			return outs, nil
		}
	}
	plain, err := x.stackOutput(ctx, true)
	if err != nil {
		return nil, err
	}
	for _, k := range secrets {
		outs[k] = Output{Value: plain[k], Secret: true}
	}
	return outs, nil
}

// backendOutputs reads the stack's outputs from the backend alone, for a log that did not
// carry them: masked, to learn which are secret, and then in plaintext.
func (x *run) backendOutputs(ctx context.Context) (map[string]Output, error) {
	masked, err := x.stackOutput(ctx, false)
	if err != nil {
		return nil, err
	}
	outs := make(map[string]Output, len(masked))
	var plain map[string]any
	for k, v := range masked {
		if !holdsMasked(v) {
			outs[k] = Output{Value: v}
			continue
		}
		if plain == nil {
			if plain, err = x.stackOutput(ctx, true); err != nil {
				return nil, err
			}
		}
		outs[k] = Output{Value: plain[k], Secret: true}
	}
	return outs, nil
}

func (x *run) stackOutput(ctx context.Context, showSecrets bool) (map[string]any, error) {
	args := []string{"stack", "output", "--json", "--stack", x.req.Stack}
	step := "read outputs"
	if showSecrets {
		args, step = append(args, "--show-secrets"), "read secret outputs"
	}
	stdout, err := x.cli(ctx, step, nil, true, args...)
	if err != nil {
		return nil, x.fail(ctx, "failed to read outputs of stack "+x.req.Stack, "", "", err)
	}
	out := map[string]any{}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		// Not %w: the text may hold secrets.
		return nil, x.fail(ctx, "failed to read outputs of stack "+x.req.Stack, "", ClassPermanent,
			errors.New("the CLI printed outputs that are not a JSON object"))
	}
	return out, nil
}

// holdsMasked reports whether a value of `stack output --json` (without --show-secrets)
// has a secret in it.
func holdsMasked(v any) bool {
	switch v := v.(type) {
	case string:
		return v == redacted
	case map[string]any:
		return slices.ContainsFunc(slices.Collect(maps.Values(v)), holdsMasked)
	case []any:
		return slices.ContainsFunc(v, holdsMasked)
	}
	return false
}

// missingStack reports whether err says the stack does not exist, and returns the CLI's
// own error (without the operation's wording around it).
func missingStack(err error) (error, bool) {
	if err == nil || !missingStackErr.MatchString(err.Error()) {
		return nil, false
	}
	var re *runError
	if errors.As(err, &re) && re.cause != nil {
		return re.cause, true
	}
	return err, true
}

// messageFlag is --message for an operation that records one: the request's message and
// the run's tag (runTag).
func (x *run) messageFlag() []string {
	msg := x.req.Message
	if x.req.RunID != "" {
		msg = strings.TrimSpace(msg + " " + runTag(x.req.RunID))
	}
	if msg == "" {
		return nil
	}
	return []string{"--message=" + msg}
}
