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
	withTTL := func(name string, ttl time.Duration) *pulumiv1.Stack {
		st := s.stack(name, "ttl")
		st.Spec.DestroyOnFinalize = false
		st.Spec.Stackwright = &pulumiv1.StackwrightSpec{TTL: &pulumiv1.StackTTL{After: metav1.Duration{Duration: ttl}}}
		return st
	}
	// kept's TTL leaves time to extend it under load: it is extended once the controller
	// has recorded the expiry the TTL gives, not once it is Ready (its first update may
	// take longer than a TTL short enough for this test).
	const keptTTL = 30 * time.Second
	short, kept := withTTL("short", 10*time.Second), withTTL("kept", keptTTL)
	s.create(short)
	s.create(kept)
	s.eventually(func(g Gomega) {
		sw := s.get(g, "kept").Status.Stackwright
		g.Expect(sw).NotTo(BeNil())
		g.Expect(sw.ExpiresAt).NotTo(BeNil())
	})
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
	s.waitReady("kept")
	time.Sleep(time.Until(kept.CreationTimestamp.Add(keptTTL + 3*time.Second)))
	s.eventually(func(g Gomega) {
		st := s.get(g, "kept")
		g.Expect(st.DeletionTimestamp).To(BeNil())
		g.Expect(st.Status.Stackwright.ExpiredAt).To(BeNil())
	})
	if content, err := s.readFile("kept.txt"); err != nil || content != "short-lived" {
		t.Errorf("kept.txt = %q, %v: the extended Stack's resources are gone", content, err)
	}
}
