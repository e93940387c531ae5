package stack_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// A Stack whose TTL expires is destroyed (its resources gone, though it does not ask for a
// destroy on deletion) and deleted; one whose expiry was pushed back outlives its TTL.
func TestStackReconciler_TTL_ExpiredStackIsDestroyedAndDeleted(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("ttl", map[string]pulumiv1.Resource{"f": fileResource("${pulumi.stack}.txt", "short-lived")}, nil))
	const ttl = 10 * time.Second
	withTTL := func(name string) *pulumiv1.Stack {
		st := s.stack(name, "ttl")
		st.Spec.DestroyOnFinalize = false
		st.Spec.Stackwright = &pulumiv1.StackwrightSpec{TTL: &pulumiv1.StackTTL{After: metav1.Duration{Duration: ttl}}}
		return st
	}
	short, kept := withTTL("short"), withTTL("kept")
	s.create(short)
	s.create(kept)
	s.waitReady("kept")
	s.patch(kept, func() {
		kept.Annotations = map[string]string{pulumiv1.ExpiresAtAnnotation: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
	})
	s.waitGone(short)
	s.requireDestroyed("short.txt")

	// Past the TTL kept would have had, with its extension seen: it stays.
	s.eventually(func(g Gomega) {
		st := s.get(g, "kept")
		g.Expect(st.Status.Stackwright.ExpiresAt).NotTo(BeNil())
		g.Expect(st.Status.Stackwright.ExpiresAt.Time).To(BeTemporally(">", time.Now().Add(50*time.Minute)))
	})
	time.Sleep(time.Until(kept.CreationTimestamp.Add(ttl + 3*time.Second)))
	s.eventually(func(g Gomega) {
		st := s.get(g, "kept")
		g.Expect(st.DeletionTimestamp).To(BeNil())
		g.Expect(st.Status.Stackwright.ExpiredAt).To(BeNil())
	})
	if content, err := s.readFile("kept.txt"); err != nil || content != "short-lived" {
		t.Errorf("kept.txt = %q, %v: the extended Stack's resources are gone", content, err)
	}
}
