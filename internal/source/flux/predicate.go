package flux

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ArtifactChanged passes the changes of a Flux source that a referencing Stack can act on:
// the source became usable (Ready, current, with an artifact), or published a different
// artifact while usable. Creations and deletions pass too.
//
// It drops the rest, notably source-controller's progress writes: while it builds a new
// artifact it sets Ready=Unknown, and waking every referencing Stack then would only have
// them report the source unavailable until the next write, which passes.
type ArtifactChanged struct{ predicate.Funcs }

// Update implements predicate.Predicate.
func (ArtifactChanged) Update(e event.UpdateEvent) bool {
	now, ok := usable(e.ObjectNew)
	if !ok {
		return false
	}
	before, ok := usable(e.ObjectOld)
	return !ok || before != now
}

func usable(o client.Object) (published, bool) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return published{}, false
	}
	p, err := readArtifact(u)
	return p, err == nil
}
