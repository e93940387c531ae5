package program

import (
	"bytes"
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/source"
	"github.com/stackwright/stackwright/internal/source/program/project"
)

// Resolver resolves programRef sources to the artifact the Program controller rendered and
// stored for the Program's current generation: there is one render path, and a fleet of
// Stacks sharing a Program costs one render per change.
type Resolver struct {
	Client client.Reader
	Store  *artifact.Store
}

var _ source.Resolver = (*Resolver)(nil)

// Resolve implements source.Resolver. Until the Program's current generation is rendered
// (or its artifact restored to the store after a restart), the Stack waits; a generation
// that cannot be rendered stalls it with the Program's own message.
func (r *Resolver) Resolve(ctx context.Context, stack *pulumiv1.Stack) (source.Artifact, error) {
	ref := stack.Spec.ProgramRef
	if ref == nil {
		return source.Artifact{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.programRef is not set")
	}
	p := &pulumiv1.Program{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: ref.Name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return source.Artifact{}, fault.Retry(pulumiv1.ReasonSourceUnavailable, "Program %q not found in namespace %q", ref.Name, stack.Namespace)
		}
		return source.Artifact{}, fmt.Errorf("failed to get Program %s: %w", ref.Name, err)
	}
	if p.Status.ObservedGeneration != p.Generation {
		return source.Artifact{}, fault.Retry(pulumiv1.ReasonSourceUnavailable, "waiting for Program %q to render generation %d", p.Name, p.Generation)
	}
	if c := apimeta.FindStatusCondition(p.Status.Conditions, pulumiv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return source.Artifact{}, fault.Stall(c.Reason, "Program %q cannot be rendered: %s", p.Name, c.Message)
	}
	a := p.Status.Artifact
	if a == nil || !apimeta.IsStatusConditionTrue(p.Status.Conditions, pulumiv1.ConditionReady) {
		return source.Artifact{}, fault.Retry(pulumiv1.ReasonSourceUnavailable, "waiting for Program %q to render generation %d", p.Name, p.Generation)
	}
	if !r.Store.Has(a.Digest) {
		if err := r.restore(p, a.Digest); err != nil {
			return source.Artifact{}, err
		}
	}
	return source.Artifact{Revision: a.Revision, Digest: a.Digest}, nil
}

// restore puts a Program's artifact back into a store that lacks it: the manager restarted
// on a fresh disk, or another shard's manager recorded the status. Rendering is
// deterministic, so the same render yields the recorded digest; if it does not (another
// version of Stackwright recorded it), the Stack waits for this manager's Program
// controller to record its own.
func (r *Resolver) restore(p *pulumiv1.Program, digest string) error {
	tarball, err := project.Tarball(p)
	if err != nil {
		return fault.Stall(pulumiv1.ReasonSpecInvalid, "Program %q cannot be rendered: %v", p.Name, err)
	}
	if got := artifact.Digest(tarball); got != digest {
		return fault.Retry(pulumiv1.ReasonSourceUnavailable, "waiting for Program %q to be rendered again: its status names artifact %s, this manager renders %s", p.Name, digest, got)
	}
	if _, err := r.Store.Put(bytes.NewReader(tarball), project.MaxArtifactBytes); err != nil {
		return fmt.Errorf("failed to store artifact of Program %s: %w", p.Name, err)
	}
	return nil
}
