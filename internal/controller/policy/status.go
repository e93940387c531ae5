package policy

import (
	"github.com/stackwright/stackwright/api/conditions"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// markCompiled records whether o's current generation compiles (err nil) or not.
func markCompiled(o object, err error) {
	if err != nil {
		conditions.MarkStalled(o.obj, ReasonCompileError, err.Error())
	} else {
		conditions.MarkReady(o.obj, ReasonCompiled, "the module compiles and defines "+v1alpha1.PolicyRule)
	}
}

// finalizeStatus moves observedGeneration once the generation is settled (Ready or
// Stalled), as every controller here does.
func finalizeStatus(o object) {
	conditions.Finalize(o.obj, &o.status.ObservedGeneration)
}
