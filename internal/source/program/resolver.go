package program

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/source"
)

// maxProgramBytes bounds a rendered Program; the API server's own object size limit
// (about 1.5 MiB) keeps real ones far below it.
const maxProgramBytes = 8 << 20

// Resolver resolves programRef sources by rendering the Program itself, so a Stack never
// waits for the Program controller and both always agree on the artifact (rendering is
// deterministic).
type Resolver struct {
	Client client.Reader
	Store  *artifact.Store

	mu sync.Mutex
	// rendered remembers the artifact of the latest generation of each Program, so that a
	// fleet of Stacks sharing a Program renders it once per change, not once per
	// reconcile. Deleted Programs leave one small entry each until the manager restarts.
	rendered map[types.UID]rendering
}

type rendering struct {
	generation int64
	artifact   source.Artifact
}

var _ source.Resolver = (*Resolver)(nil)

// Resolve implements source.Resolver.
func (r *Resolver) Resolve(ctx context.Context, stack *pulumiv1.Stack) (source.Artifact, error) {
	ref := stack.Spec.ProgramRef
	if ref == nil {
		return source.Artifact{}, fault.Stall(pulumiv1.ReasonInvalidSpec, "spec.programRef is not set")
	}
	p := &pulumiv1.Program{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: ref.Name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return source.Artifact{}, fault.Retry(pulumiv1.ReasonSourceUnavailable, "Program %q not found in namespace %q", ref.Name, stack.Namespace)
		}
		return source.Artifact{}, fmt.Errorf("failed to get Program %s: %w", ref.Name, err)
	}
	r.mu.Lock()
	cached, ok := r.rendered[p.UID]
	r.mu.Unlock()
	if ok && cached.generation == p.Generation && r.Store.Has(cached.artifact.Digest) {
		return cached.artifact, nil
	}
	a, err := r.render(p)
	if err != nil {
		return source.Artifact{}, err
	}
	r.mu.Lock()
	if r.rendered == nil {
		r.rendered = map[types.UID]rendering{}
	}
	r.rendered[p.UID] = rendering{generation: p.Generation, artifact: a}
	r.mu.Unlock()
	return a, nil
}

func (r *Resolver) render(p *pulumiv1.Program) (source.Artifact, error) {
	files, err := Pack(p)
	if err != nil {
		return source.Artifact{}, fault.Stall(pulumiv1.ReasonInvalidSpec, "Program %q cannot be rendered: %v", p.Name, err)
	}
	tarball, err := artifact.Pack(files)
	if err != nil {
		return source.Artifact{}, fmt.Errorf("failed to pack Program %s: %w", p.Name, err)
	}
	digest, err := r.Store.Put(bytes.NewReader(tarball), maxProgramBytes)
	if err != nil {
		return source.Artifact{}, fmt.Errorf("failed to store Program %s: %w", p.Name, err)
	}
	return source.Artifact{Revision: Revision(p), Digest: digest}, nil
}
