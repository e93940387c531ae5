package program

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// rendered is the outcome of rendering one generation of a Program.
type rendered struct {
	digest   string
	revision string
	size     int64
	url      string
}

// markReady records a stored artifact for the current generation. lastUpdateTime moves
// only with the digest: a generation that renders to the same bytes (say, an edit undone)
// is not a new artifact, and consumers compare digests anyway.
func markReady(p *pulumiv1.Program, r rendered, now metav1.Time) {
	a := p.Status.Artifact
	if a == nil || a.Digest != r.digest || a.LastUpdateTime == nil {
		a = &pulumiv1.ProgramArtifact{LastUpdateTime: &now}
	}
	a.Digest, a.Revision, a.Size, a.URL = r.digest, r.revision, r.size, r.url
	p.Status.Artifact = a
	p.Status.ObservedGeneration = p.Generation
	setCondition(p, pulumiv1.ConditionReady, metav1.ConditionTrue, pulumiv1.ReasonArtifactReady,
		fmt.Sprintf("Rendered %s to artifact %s", r.revision, r.digest))
	meta.RemoveStatusCondition(&p.Status.Conditions, pulumiv1.ConditionReconciling)
	meta.RemoveStatusCondition(&p.Status.Conditions, pulumiv1.ConditionStalled)
}

// markStalled records a generation that can never render as written. The generation
// counts as handled (observedGeneration moves) so that kstatus reads the Program as
// stalled rather than in progress; the last good artifact stays for Stacks that use it.
func markStalled(p *pulumiv1.Program, reason, msg string) {
	p.Status.ObservedGeneration = p.Generation
	setCondition(p, pulumiv1.ConditionReady, metav1.ConditionFalse, reason, msg)
	setCondition(p, pulumiv1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	meta.RemoveStatusCondition(&p.Status.Conditions, pulumiv1.ConditionReconciling)
}

// markRetrying records a transient failure: the generation is not handled yet, so
// observedGeneration stays where it was and Reconciling says work continues.
func markRetrying(p *pulumiv1.Program, msg string) {
	setCondition(p, pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonProgressing, msg)
	setCondition(p, pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonRetryingAfterFailure, msg)
	meta.RemoveStatusCondition(&p.Status.Conditions, pulumiv1.ConditionStalled)
}

// maxMessage keeps condition messages far below the API's 32768-byte limit: a status patch
// refused for a long error message would hide the error for good.
const maxMessage = 4096

func setCondition(p *pulumiv1.Program, typ string, status metav1.ConditionStatus, reason, msg string) {
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage], "") + "..."
	}
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            msg,
		ObservedGeneration: p.Generation,
	})
}
