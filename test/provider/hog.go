package provider

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// Hog allocates memory on create and update, holds it for a while and releases it: a
// provider process that grows past its container's memory limit, so that the kernel's OOM
// killer kills it mid-update. It exists for induced faults only (the node fault campaign,
// the runner's OOM detection); a program that uses it is meant to fail.
type Hog struct{}

// HogArgs are the inputs of a Hog.
type HogArgs struct {
	Mebibytes   int     `pulumi:"mebibytes"`
	HoldSeconds float64 `pulumi:"holdSeconds,optional"`
	Value       string  `pulumi:"value,optional"`
}

// HogState is the checkpointed state of a Hog.
type HogState struct {
	Mebibytes   int     `pulumi:"mebibytes"`
	HoldSeconds float64 `pulumi:"holdSeconds"`
	Value       string  `pulumi:"value,optional"`
	// HeldMebibytes is what the last create/update allocated and touched: all of it, or
	// the provider would not have lived to report.
	HeldMebibytes int `pulumi:"heldMebibytes"`
}

const (
	// maxHogMebibytes bounds a Hog (64 GiB): a typo should not take a whole node.
	maxHogMebibytes = 64 << 10
	// defaultHoldSeconds is how long a Hog keeps its memory when holdSeconds is unset:
	// long enough for the OOM killer to act and for a sampler to see the peak.
	defaultHoldSeconds = 3.0
	mebibyte           = 1 << 20
)

var (
	_ infer.CustomCheck[HogArgs]            = (*Hog)(nil)
	_ infer.CustomUpdate[HogArgs, HogState] = (*Hog)(nil)
)

// Annotate describes the resource.
func (h *Hog) Annotate(a infer.Annotator) {
	a.SetToken("index", "Hog")
	a.Describe(&h, "Allocates and touches the given mebibytes on create and update, holds them, then releases them. For induced out-of-memory faults only.")
}

// Annotate describes the inputs.
func (a *HogArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Mebibytes, fmt.Sprintf("How much memory to allocate and touch, in MiB (0 to %d).", maxHogMebibytes))
	an.Describe(&a.HoldSeconds, "How long to hold it, in seconds (>= 0).")
	an.SetDefault(&a.HoldSeconds, defaultHoldSeconds)
	an.Describe(&a.Value, "Arbitrary value; changing it triggers an update, which allocates again.")
}

// Annotate describes the outputs.
func (s *HogState) Annotate(a infer.Annotator) {
	a.Describe(&s.HeldMebibytes, "How much memory the last create/update held, in MiB.")
	a.Describe(&s.Value, "The value input.")
}

// Check validates the inputs.
func (*Hog) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[HogArgs], error) {
	args, failures, err := infer.DefaultCheck[HogArgs](ctx, req.NewInputs)
	if err != nil || len(failures) > 0 {
		return infer.CheckResponse[HogArgs]{Inputs: args, Failures: failures}, err
	}
	failures = append(failures, checkMebibytes(req.NewInputs, args.Mebibytes)...)
	failures = append(failures, checkNonNegative(req.NewInputs, "holdSeconds", args.HoldSeconds)...)
	return infer.CheckResponse[HogArgs]{Inputs: args, Failures: failures}, nil
}

func checkMebibytes(inputs property.Map, n int) []p.CheckFailure {
	if !known(inputs, "mebibytes") || (n >= 0 && n <= maxHogMebibytes) {
		return nil
	}
	return []p.CheckFailure{{Property: "mebibytes", Reason: fmt.Sprintf("mebibytes must be between 0 and %d, got %d", maxHogMebibytes, n)}}
}

// Create allocates, holds and releases.
func (*Hog) Create(ctx context.Context, req infer.CreateRequest[HogArgs]) (infer.CreateResponse[HogState], error) {
	state, err := hog(ctx, req.Inputs, req.DryRun)
	if err != nil {
		return infer.CreateResponse[HogState]{}, err
	}
	return infer.CreateResponse[HogState]{ID: req.Name, Output: state}, nil
}

// Update allocates, holds and releases again.
func (*Hog) Update(ctx context.Context, req infer.UpdateRequest[HogArgs, HogState]) (infer.UpdateResponse[HogState], error) {
	state, err := hog(ctx, req.Inputs, req.DryRun)
	if err != nil {
		return infer.UpdateResponse[HogState]{}, err
	}
	return infer.UpdateResponse[HogState]{Output: state}, nil
}

func hog(ctx context.Context, args HogArgs, dryRun bool) (HogState, error) {
	state := HogState{Mebibytes: args.Mebibytes, HoldSeconds: args.HoldSeconds, Value: args.Value}
	if dryRun {
		return state, nil
	}
	held, err := allocate(ctx, args.Mebibytes)
	// Released whatever happens next: the provider process lives on, and a cancelled
	// update must not leave it holding gigabytes.
	defer release(&held)
	if err != nil {
		return HogState{}, err
	}
	timer := time.NewTimer(time.Duration(args.HoldSeconds * float64(time.Second)))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return HogState{}, fmt.Errorf("hog: cancelled while holding %d MiB: %w", len(held), ctx.Err())
	}
	state.HeldMebibytes = len(held)
	return state, nil
}

// allocate allocates mib MiB, one MiB at a time, and writes to every page of it: memory
// that is only allocated is not resident, and counts against no limit. Growing by a MiB
// at a time makes the process cross its limit gradually, as a real leak would, rather
// than in one mapping the kernel might refuse outright.
func allocate(ctx context.Context, mib int) ([][]byte, error) {
	page := os.Getpagesize()
	held := make([][]byte, 0, mib)
	for range mib {
		if err := ctx.Err(); err != nil {
			return held, fmt.Errorf("hog: cancelled after allocating %d of %d MiB: %w", len(held), mib, err)
		}
		chunk := make([]byte, mebibyte)
		for i := 0; i < len(chunk); i += page {
			chunk[i] = 1
		}
		held = append(held, chunk)
	}
	return held, nil
}

// release drops what allocate held and returns it to the operating system at once,
// rather than whenever the garbage collector's scavenger gets to it.
func release(held *[][]byte) {
	runtime.KeepAlive(*held)
	*held = nil
	debug.FreeOSMemory()
}
