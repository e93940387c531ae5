package source

import (
	"context"
	"time"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/metrics"
)

// Artifact is a resolved source: what to run, and where it came from.
type Artifact struct {
	// Revision is the source revision: a commit SHA, a Flux artifact revision or a
	// Program generation. It is what status.lastUpdate reports as the commit.
	Revision string
	// Digest addresses the tarball in the artifact store ("sha256:<hex>").
	Digest string
	// Dir is the project directory inside the tarball ("" for its root).
	Dir string
}

// Resolver resolves the source of one kind of Stack. Failures the Stack's status should
// explain are *fault.Error values (reason SourceUnavailable while a source is missing or not
// ready, CrossNamespaceReference or SpecInvalid when it can never work).
type Resolver interface {
	Resolve(ctx context.Context, stack *pulumiv1.Stack) (Artifact, error)
}

// Registry picks the Resolver for a Stack's kind of source.
type Registry map[pulumiv1.SourceKind]Resolver

// Resolve resolves stack's source with the Resolver registered for its kind.
func (r Registry) Resolve(ctx context.Context, stack *pulumiv1.Stack) (Artifact, error) {
	t0 := time.Now()
	art, err := r.resolve(ctx, stack)
	reason := ""
	if f, ok := fault.As(err); ok {
		reason = f.Reason
	} else if err != nil {
		reason = "Error"
	}
	metrics.ObserveSourceResolve(string(stack.Spec.SourceKind()), time.Since(t0), reason)
	return art, err
}

func (r Registry) resolve(ctx context.Context, stack *pulumiv1.Stack) (Artifact, error) {
	kind := stack.Spec.SourceKind()
	res, ok := r[kind]
	if !ok {
		switch kind {
		case "":
			return Artifact{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "the Stack names no program: set one of spec.projectRepo, spec.fluxSource or spec.programRef, or a spec.workspaceTemplate with spec.image and spec.local.dir (a program baked into the image)")
		case pulumiv1.SourceKindImage:
			return Artifact{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "the program is baked into the workspace image (spec.workspaceTemplate spec.local.dir), which only the Job executor can run; this manager runs --executor=local")
		}
		return Artifact{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "%s sources are not supported by this manager", kind)
	}
	return res.Resolve(ctx, stack)
}
