package flux

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// The predicate wakes Stacks when the source becomes usable or publishes another artifact,
// and not for source-controller's progress writes or for changes that leave the artifact
// as it was.
func TestArtifactChanged_Update(t *testing.T) {
	source := func(generation, observed int64, ready, digest, revision string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(v1)
		u.SetKind("GitRepository")
		u.SetName("infra")
		u.SetGeneration(generation)
		status := map[string]any{
			"observedGeneration": observed,
			"conditions":         []any{map[string]any{"type": "Ready", "status": ready, "reason": "r", "message": "m"}},
		}
		if digest != "" {
			status["artifact"] = map[string]any{"url": "http://sc/a.tar.gz", "revision": revision, "digest": digest}
		}
		u.Object["status"] = status
		return u
	}
	const (
		d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
		d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	)
	cases := []struct {
		name     string
		old, new *unstructured.Unstructured
		want     bool
	}{
		{name: "first artifact", old: source(1, 1, "False", "", ""), new: source(1, 1, "True", d1, "main@sha1:a"), want: true},
		{name: "new artifact", old: source(1, 1, "True", d1, "main@sha1:a"), new: source(1, 1, "True", d2, "main@sha1:b"), want: true},
		{name: "same tarball, new revision", old: source(1, 1, "True", d1, "main@sha1:a"), new: source(1, 1, "True", d1, "main@sha1:b"), want: true},
		{name: "ready again with the same artifact", old: source(1, 1, "Unknown", d1, "main@sha1:a"), new: source(1, 1, "True", d1, "main@sha1:a"), want: true},
		{name: "new spec observed", old: source(2, 1, "True", d1, "main@sha1:a"), new: source(2, 2, "True", d2, "release@sha1:c"), want: true},
		{name: "building an artifact", old: source(1, 1, "True", d1, "main@sha1:a"), new: source(1, 1, "Unknown", d1, "main@sha1:a"), want: false},
		{name: "failing", old: source(1, 1, "True", d1, "main@sha1:a"), new: source(1, 1, "False", d1, "main@sha1:a"), want: false},
		{name: "spec changed, not yet observed", old: source(1, 1, "True", d1, "main@sha1:a"), new: source(2, 1, "True", d1, "main@sha1:a"), want: false},
		{name: "nothing the Stack uses changed", old: source(1, 1, "True", d1, "main@sha1:a"), new: source(1, 1, "True", d1, "main@sha1:a"), want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := (ArtifactChanged{}).Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("Update() = %t; want %t", got, tc.want)
			}
		})
	}
}
