package provider

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi-go-provider/infer"
)

// Flaky fails its first `failures` creates/updates, then succeeds, and likewise
// fails its first `failDeletes` deletes. Attempts are counted in files so that
// the counts survive provider restarts.
type Flaky struct{}

// FlakyArgs are the inputs of a Flaky.
type FlakyArgs struct {
	Failures    int    `pulumi:"failures"`
	FailDeletes int    `pulumi:"failDeletes,optional"`
	CounterFile string `pulumi:"counterFile"`
	Value       string `pulumi:"value,optional"`
}

// FlakyState is the checkpointed state of a Flaky.
type FlakyState struct {
	Failures    int    `pulumi:"failures"`
	FailDeletes int    `pulumi:"failDeletes,optional"`
	CounterFile string `pulumi:"counterFile"`
	Value       string `pulumi:"value,optional"`
	Attempts    int    `pulumi:"attempts"`
}

var (
	_ infer.CustomCheck[FlakyArgs]              = (*Flaky)(nil)
	_ infer.CustomUpdate[FlakyArgs, FlakyState] = (*Flaky)(nil)
	_ infer.CustomDelete[FlakyState]            = (*Flaky)(nil)
)

// deleteCounterSuffix names the file counting delete attempts, next to counterFile.
const deleteCounterSuffix = ".deletes"

// Annotate describes the resource.
func (f *Flaky) Annotate(a infer.Annotator) {
	a.SetToken("index", "Flaky")
	a.Describe(&f, "Fails the first `failures` creates/updates (counted across runs in counterFile), then succeeds.")
}

// Annotate describes the inputs.
func (a *FlakyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Failures, "How many create/update attempts fail before one succeeds.")
	an.Describe(&a.FailDeletes, "How many delete attempts fail before one succeeds (counted in counterFile"+deleteCounterSuffix+").")
	an.Describe(&a.CounterFile, "File, relative to $"+RootEnvVar+", holding the attempt counter.")
	an.Describe(&a.Value, "Arbitrary value; changing it triggers an update.")
}

// Annotate describes the outputs.
func (s *FlakyState) Annotate(a infer.Annotator) {
	a.Describe(&s.Attempts, "The counter value at the attempt that succeeded.")
	a.Describe(&s.Value, "The value input.")
}

// Check validates the inputs.
func (*Flaky) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[FlakyArgs], error) {
	args, failures, err := infer.DefaultCheck[FlakyArgs](ctx, req.NewInputs)
	if err != nil || len(failures) > 0 {
		return infer.CheckResponse[FlakyArgs]{Inputs: args, Failures: failures}, err
	}
	failures = append(failures, checkNonNegative(req.NewInputs, "failures", float64(args.Failures))...)
	failures = append(failures, checkNonNegative(req.NewInputs, "failDeletes", float64(args.FailDeletes))...)
	failures = append(failures, checkRelPath(req.NewInputs, "counterFile", args.CounterFile)...)
	return infer.CheckResponse[FlakyArgs]{Inputs: args, Failures: failures}, nil
}

// Create counts an attempt and fails or succeeds accordingly.
func (*Flaky) Create(
	ctx context.Context, req infer.CreateRequest[FlakyArgs],
) (infer.CreateResponse[FlakyState], error) {
	id, err := cleanRelPath(req.Inputs.CounterFile)
	if err != nil {
		return infer.CreateResponse[FlakyState]{}, err
	}
	state, err := flakyAttempt(req.Inputs, req.DryRun)
	if err != nil {
		return infer.CreateResponse[FlakyState]{}, err
	}
	return infer.CreateResponse[FlakyState]{ID: id, Output: state}, nil
}

// Update counts an attempt and fails or succeeds accordingly.
func (*Flaky) Update(
	ctx context.Context, req infer.UpdateRequest[FlakyArgs, FlakyState],
) (infer.UpdateResponse[FlakyState], error) {
	state, err := flakyAttempt(req.Inputs, req.DryRun)
	if err != nil {
		return infer.UpdateResponse[FlakyState]{}, err
	}
	return infer.UpdateResponse[FlakyState]{Output: state}, nil
}

// Delete counts a delete attempt and fails while failDeletes is not exhausted.
func (*Flaky) Delete(ctx context.Context, req infer.DeleteRequest[FlakyState]) (infer.DeleteResponse, error) {
	if req.State.FailDeletes == 0 {
		return infer.DeleteResponse{}, nil
	}
	path, err := resolveUnderRoot(req.State.CounterFile + deleteCounterSuffix)
	if err != nil {
		return infer.DeleteResponse{}, err
	}
	attempt, err := incrementCounter(path)
	if err != nil {
		return infer.DeleteResponse{}, err
	}
	return infer.DeleteResponse{}, flakyOutcome(attempt, req.State.FailDeletes)
}

func flakyAttempt(args FlakyArgs, dryRun bool) (FlakyState, error) {
	state := FlakyState{Failures: args.Failures, FailDeletes: args.FailDeletes, CounterFile: args.CounterFile, Value: args.Value}
	if dryRun {
		return state, nil
	}
	path, err := resolveUnderRoot(args.CounterFile)
	if err != nil {
		return FlakyState{}, err
	}
	attempt, err := incrementCounter(path)
	if err != nil {
		return FlakyState{}, err
	}
	if err := flakyOutcome(attempt, args.Failures); err != nil {
		return FlakyState{}, err
	}
	state.Attempts = attempt
	return state, nil
}

// flakyOutcome decides whether attempt number `attempt` (1-based) fails.
func flakyOutcome(attempt, failures int) error {
	if attempt <= failures {
		return fmt.Errorf("flaky: induced failure %d of %d", attempt, failures)
	}
	return nil
}

// incrementCounter adds one to the integer stored in path (a missing or empty
// file counts as 0), persists it and returns the new value.
func incrementCounter(path string) (int, error) {
	n := 0
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, fmt.Errorf("reading counter %s: %w", path, err)
	default:
		if text := strings.TrimSpace(string(data)); text != "" {
			n, err = strconv.Atoi(text)
			if err != nil {
				return 0, fmt.Errorf("counter %s does not hold an integer: %w", path, err)
			}
		}
	}
	n++
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, fmt.Errorf("creating parent directories of %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
		return 0, fmt.Errorf("writing counter %s: %w", path, err)
	}
	return n, nil
}
