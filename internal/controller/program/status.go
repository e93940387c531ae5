package program

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// rendered is the outcome of rendering one generation of a Program.
type rendered struct {
	digest   string
	revision string
	size     int64
	path     string
}

// markReady records a stored artifact for the current generation. lastUpdateTime moves
// only with the digest: a generation that renders to the same bytes (say, an edit undone)
// is not a new artifact, and consumers compare digests anyway.
func markReady(p *pulumiv1.Program, r rendered, now metav1.Time) {
	a := p.Status.Artifact
	if a == nil || a.Digest != r.digest || a.LastUpdateTime == nil {
		a = &pulumiv1.ProgramArtifact{LastUpdateTime: &now}
	}
	a.Digest, a.Revision, a.Size, a.Path = r.digest, r.revision, r.size, r.path
	p.Status.Artifact = a
	conditions.MarkReady(p, pulumiv1.ReasonArtifactReady, fmt.Sprintf("Rendered %s to artifact %s", r.revision, r.digest))
}

// markStalled records a generation that can never render as written; the last good
// artifact stays for the Stacks that use it.
func markStalled(p *pulumiv1.Program, reason, msg string) { conditions.MarkStalled(p, reason, msg) }

// markRetrying records a transient failure: work continues.
func markRetrying(p *pulumiv1.Program, msg string) {
	conditions.MarkReconciling(p, pulumiv1.ReasonRetryingAfterFailure, msg)
}

// finalizeStatus counts the generation as observed once the Program is Ready or Stalled
// for it (so that kstatus reads a Program that cannot render as stalled, not in progress)
// and clears Reconciling then.
func finalizeStatus(p *pulumiv1.Program) {
	conditions.Finalize(p, &p.Status.ObservedGeneration)
}
