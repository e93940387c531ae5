package engine

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
)

// rootStackType is the type of the resource every program's outputs belong to.
const rootStackType = "pulumi:pulumi:Stack"

// Secret values in the CLI's event log are objects carrying this signature; their
// plaintext is never in the log ("ciphertext": "[secret]").
const (
	secretSigKey   = "4dabf18193072939515e22adb298388d"
	secretSigValue = "1b47061264138c4ac30d75fd1eb44270"
)

// opEvents is what Run needs from one operation's event log: the change counts and the
// stack's outputs before and after, so that no further CLI call is needed for them.
type opEvents struct {
	// summary is the operation's closing SummaryEvent; nil when the log ended without one.
	summary *apitype.SummaryEvent
	// before are the root stack's outputs in the state the operation started from; after
	// are those it registered. haveBefore and haveAfter say whether the log carried them:
	// a new stack has no prior state, and a log cut short may lack either.
	before, after         map[string]any
	haveBefore, haveAfter bool
	// steps are the resource operations announced, unchanged resources left out.
	steps []Step
}

// unlistedOps are the step operations a Step list leaves out: resources left as they are,
// and the parts of a replacement that its "replace" step already stands for.
var unlistedOps = map[apitype.OpType]bool{
	apitype.OpSame:                 true,
	apitype.OpCreateReplacement:    true,
	apitype.OpDeleteReplaced:       true,
	apitype.OpDiscardReplaced:      true,
	apitype.OpRemovePendingReplace: true,
}

// readEvents parses the event log the CLI wrote to path (one JSON event per line). A
// missing log is an empty one: the CLI creates it only once the engine starts.
func readEvents(path string) (opEvents, error) {
	var ev opEvents
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return ev, nil
	}
	if err != nil {
		return ev, fmt.Errorf("failed to open event log: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		line, rerr := r.ReadBytes('\n')
		if len(line) > 0 {
			var e apitype.EngineEvent
			// A cancelled CLI may leave its last line half written; what came before holds.
			if json.Unmarshal(line, &e) == nil {
				ev.add(e)
			}
		}
		if errors.Is(rerr, io.EOF) {
			return ev, nil
		}
		if rerr != nil {
			return ev, fmt.Errorf("failed to read event log: %w", rerr)
		}
	}
}

func (ev *opEvents) add(e apitype.EngineEvent) {
	var md *apitype.StepEventMetadata
	switch {
	case e.SummaryEvent != nil:
		ev.summary = e.SummaryEvent
		return
	case e.ResourcePreEvent != nil:
		md = &e.ResourcePreEvent.Metadata
		if !unlistedOps[md.Op] {
			ev.steps = append(ev.steps, step(md))
		}
	case e.ResOutputsEvent != nil:
		md = &e.ResOutputsEvent.Metadata
	default:
		return
	}
	if md.Type != rootStackType {
		return
	}
	if !ev.haveBefore {
		// The first step of the root stack starts from the state: none for a new stack.
		ev.haveBefore = true
		if md.Old != nil {
			ev.before = md.Old.Outputs
		}
	}
	if e.ResOutputsEvent != nil && md.New != nil {
		ev.after, ev.haveAfter = md.New.Outputs, true
	}
}

// changes are the summary's resource counts by operation.
func (ev opEvents) changes() map[string]int {
	out := map[string]int{}
	if ev.summary != nil {
		for op, n := range ev.summary.ResourceChanges {
			out[string(op)] = n
		}
	}
	return out
}

// logOutputs turns outputs as the event log has them into Outputs. An output that holds
// a secret anywhere inside it is secret as a whole and has no value here; the caller reads
// the values of secret outputs from the backend.
func logOutputs(m map[string]any) (outs map[string]Output, secrets []string) {
	outs = make(map[string]Output, len(m))
	for k, v := range m {
		if holdsSecret(v) {
			outs[k] = Output{Secret: true}
			secrets = append(secrets, k)
			continue
		}
		outs[k] = Output{Value: v}
	}
	return outs, secrets
}

func holdsSecret(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		if v[secretSigKey] == secretSigValue {
			return true
		}
		for _, e := range v {
			if holdsSecret(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if holdsSecret(e) {
				return true
			}
		}
	}
	return false
}

// step makes a Step of a step event's metadata.
func step(md *apitype.StepEventMetadata) Step {
	st := Step{Op: string(md.Op), URN: md.URN, Type: md.Type, Replacing: md.Keys}
	if len(md.DetailedDiff) > 0 {
		st.Changed = slices.Sorted(maps.Keys(md.DetailedDiff))
	} else {
		st.Changed = md.Diffs
	}
	if md.Old != nil {
		st.OldInputs, st.Protected = md.Old.Inputs, md.Old.Protect
	}
	if md.New != nil {
		st.Inputs = md.New.Inputs
		if md.Old == nil {
			st.Protected = md.New.Protect
		}
	}
	return st
}
