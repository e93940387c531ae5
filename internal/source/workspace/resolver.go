package workspace

import (
	"context"
	"path"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/source"
)

// RevisionPrefix starts the revision of a program baked into an image: the revision is
// the image reference, so a new tag or digest is a new desired state.
const RevisionPrefix = "image:"

// Resolver resolves Image sources. It has no state: the image reference is the revision.
type Resolver struct{}

// Resolve returns the artifact of stack's custom source: no digest (there is nothing to
// fetch), the image as the revision and local.dir as the project directory.
func (Resolver) Resolve(_ context.Context, stack *pulumiv1.Stack) (source.Artifact, error) {
	p, ok := stack.Spec.WorkspaceProgram()
	switch {
	case !ok:
		return source.Artifact{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.workspaceTemplate sets no spec.local.dir")
	case p.Image == "":
		return source.Artifact{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.workspaceTemplate sets spec.local.dir %q but no spec.image to find it in", p.Dir)
	case !path.IsAbs(p.Dir) || path.Clean(p.Dir) != p.Dir:
		return source.Artifact{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.workspaceTemplate spec.local.dir %q must be a clean absolute path in the image", p.Dir)
	}
	return source.Artifact{Revision: RevisionPrefix + p.Image, Dir: p.Dir}, nil
}
