package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"
)

// Sleep blocks for a while on create and update, honouring cancellation.
type Sleep struct{}

// SleepArgs are the inputs of a Sleep.
type SleepArgs struct {
	Seconds float64 `pulumi:"seconds"`
	Value   string  `pulumi:"value,optional"`
}

// SleepState is the checkpointed state of a Sleep.
type SleepState struct {
	Seconds      float64 `pulumi:"seconds"`
	Value        string  `pulumi:"value,optional"`
	SleptSeconds float64 `pulumi:"sleptSeconds"`
}

var (
	_ infer.CustomCheck[SleepArgs]              = (*Sleep)(nil)
	_ infer.CustomUpdate[SleepArgs, SleepState] = (*Sleep)(nil)
)

// Annotate describes the resource.
func (s *Sleep) Annotate(a infer.Annotator) {
	a.SetToken("index", "Sleep")
	a.Describe(&s, "Sleeps on create and update; returns early with an error if cancelled.")
}

// Annotate describes the inputs.
func (a *SleepArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Seconds, "How long to sleep, in seconds (>= 0).")
	an.Describe(&a.Value, "Arbitrary value; changing it triggers an update.")
}

// Annotate describes the outputs.
func (s *SleepState) Annotate(a infer.Annotator) {
	a.Describe(&s.SleptSeconds, "How long the last create/update slept, in seconds.")
	a.Describe(&s.Value, "The value input.")
}

// Check validates the inputs.
func (*Sleep) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[SleepArgs], error) {
	args, failures, err := infer.DefaultCheck[SleepArgs](ctx, req.NewInputs)
	if err != nil || len(failures) > 0 {
		return infer.CheckResponse[SleepArgs]{Inputs: args, Failures: failures}, err
	}
	failures = checkNonNegative(req.NewInputs, "seconds", args.Seconds)
	return infer.CheckResponse[SleepArgs]{Inputs: args, Failures: failures}, nil
}

// Create sleeps.
func (*Sleep) Create(
	ctx context.Context, req infer.CreateRequest[SleepArgs],
) (infer.CreateResponse[SleepState], error) {
	state, err := sleepFor(ctx, req.Inputs, req.DryRun)
	if err != nil {
		return infer.CreateResponse[SleepState]{}, err
	}
	return infer.CreateResponse[SleepState]{ID: req.Name, Output: state}, nil
}

// Update sleeps.
func (*Sleep) Update(
	ctx context.Context, req infer.UpdateRequest[SleepArgs, SleepState],
) (infer.UpdateResponse[SleepState], error) {
	state, err := sleepFor(ctx, req.Inputs, req.DryRun)
	if err != nil {
		return infer.UpdateResponse[SleepState]{}, err
	}
	return infer.UpdateResponse[SleepState]{Output: state}, nil
}

func sleepFor(ctx context.Context, args SleepArgs, dryRun bool) (SleepState, error) {
	state := SleepState{Seconds: args.Seconds, Value: args.Value, SleptSeconds: args.Seconds}
	if dryRun {
		return state, nil
	}
	timer := time.NewTimer(time.Duration(args.Seconds * float64(time.Second)))
	defer timer.Stop()
	select {
	case <-timer.C:
		return state, nil
	case <-ctx.Done():
		return SleepState{}, fmt.Errorf("sleep: cancelled before %vs elapsed: %w", args.Seconds, ctx.Err())
	}
}
