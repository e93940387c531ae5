package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// runTag is how a run's RunID appears in the message the backend's history records.
func runTag(id string) string { return "[run " + id + "]" }

// historyEntry is one entry of `pulumi stack history --json`.
type historyEntry struct {
	Version         int64          `json:"version"`
	Kind            string         `json:"kind"`
	Message         string         `json:"message"`
	Result          string         `json:"result"`
	ResourceChanges map[string]int `json:"resourceChanges"`
}

// lostRun returns the run of Request.Recover that the backend's latest history entry
// records, if that run succeeded. Only the latest entry counts: a run after the lost one
// (a person's up, a refresh) means the stack has moved on, and the up must run.
func (x *run) lostRun(ctx context.Context) (*Recovered, map[string]int, error) {
	// Quiet: the entry lists the stack's config, secret values as ciphertext.
	out, err := x.cli(ctx, "history", nil, true, "stack", "history", "--json", "--page-size=1", "--stack", x.req.Stack, "--color="+noColor)
	if err != nil {
		return nil, nil, x.fail(ctx, "failed to read history of stack "+x.req.Stack, "", ClassTransient, err)
	}
	var entries []historyEntry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		return nil, nil, x.fail(ctx, "failed to read history of stack "+x.req.Stack, "", ClassTransient, fmt.Errorf("failed to parse history: %w", err))
	}
	id, ok := recoverable(entries, x.req.Recover)
	if !ok {
		return nil, nil, nil
	}
	return &Recovered{RunID: id, Version: entries[0].Version}, entries[0].ResourceChanges, nil
}

// recoverable returns which of the lost runs the latest history entry (entries are newest
// first) is, if it is a succeeded update of one of them.
func recoverable(entries []historyEntry, lost []string) (string, bool) {
	if len(entries) == 0 {
		return "", false
	}
	e := entries[0]
	if e.Kind != "update" || e.Result != "succeeded" {
		return "", false
	}
	i := slices.IndexFunc(lost, func(id string) bool { return id != "" && strings.Contains(e.Message, runTag(id)) })
	if i < 0 {
		return "", false
	}
	return lost[i], true
}

// recover reports the lost run that Request.Recover names, when the backend's history
// shows it completed, as this up's result: its changes and the stack's current outputs.
func (x *run) recover(ctx context.Context) (Result, bool, error) {
	if len(x.req.Recover) == 0 {
		return Result{}, false, nil
	}
	found, changes, err := x.lostRun(ctx)
	if err != nil || found == nil {
		return Result{}, false, err
	}
	x.log.println(fmt.Sprintf("the backend's history shows run %s succeeded: it is not run again", found.RunID))
	res, err := x.withOutputs(ctx, nil, false, Result{
		Changes:   changes,
		Recovered: found,
		Message:   fmt.Sprintf("up succeeded: %s (the run of %s, whose runner was lost before it reported; found in the backend's history and not run again)", describe(changes, false), found.RunID),
	})
	return res, true, err
}

// pendingOperation is how the CLI lists, under its warning about an interrupted update, an
// operation left pending in the state: "* <urn>, interrupted while creating".
var pendingOperation = regexp.MustCompile(`(?m)^\s*\* (urn:pulumi:\S+), interrupted while (\w+)\s*$`)

// pendingOperations returns the pending operations an operation's output warns about, as
// "<urn> (interrupted while <verb>)". The CLI goes ahead despite them; pending creates stay
// in the state until someone who checked the provider clears or imports them.
func pendingOperations(stdout string) []string {
	if !strings.Contains(stdout, "pending operations from previous deployment") {
		return nil
	}
	var ops []string
	for _, m := range pendingOperation.FindAllStringSubmatch(stdout, -1) {
		op := m[1] + " (interrupted while " + m[2] + ")"
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	return ops
}
