package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/source"
)

// keyInput is everything a desired state is derived from. Its JSON encoding is hashed, so
// field order is fixed by the struct and maps are not allowed.
type keyInput struct {
	Revision         string   `json:"revision"`
	Digest           string   `json:"digest"`
	Dir              string   `json:"dir"`
	Generation       int64    `json:"generation"`
	Inputs           string   `json:"inputs"`
	Operation        string   `json:"operation"`
	Refresh          bool     `json:"refresh"`
	ExpectNoChanges  bool     `json:"expectNoChanges"`
	Targets          []string `json:"targets"`
	TargetDependents bool     `json:"targetDependents"`
}

// desiredStateKey hashes the source artifact, the spec generation, the fingerprint of the
// referenced ConfigMaps and Secrets, and the operation with its options.
func desiredStateKey(stack *pulumiv1.Stack, op v1alpha1.UpdateType, a source.Artifact, inputsFingerprint string) string {
	spec := &stack.Spec
	b, _ := json.Marshal(keyInput{ // a struct of strings, bools and ints always marshals
		Revision:         a.Revision,
		Digest:           a.Digest,
		Dir:              a.Dir,
		Generation:       stack.Generation,
		Inputs:           inputsFingerprint,
		Operation:        string(op),
		Refresh:          spec.Refresh,
		ExpectNoChanges:  spec.ExpectNoRefreshChanges,
		Targets:          spec.Targets,
		TargetDependents: spec.TargetDependents,
	})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// operation is what reconciling the Stack runs: PKO's preview stacks only ever preview.
func operation(spec *pulumiv1.StackSpec) v1alpha1.UpdateType {
	if spec.Preview {
		return v1alpha1.UpdateTypePreview
	}
	return v1alpha1.UpdateTypeUp
}
