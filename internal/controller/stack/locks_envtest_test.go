package stack_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// A lock whose holder is alive (a person's `pulumi up`, here the test binary itself) is never
// broken, and never stalls the Stack however often it is met, with or without
// retryOnUpdateConflict: the Stack waits, naming the lock, and goes on once the lock is
// released. The same holds for the destroy that deletion runs.
func TestStackReconciler_Reconcile_LockedStackWaitsWithoutStalling(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("locked", map[string]pulumiv1.Resource{"f": fileResource("locked.txt", "v1")}, nil))
	lock := s.plantLiveLock("locked", "locked")
	st := s.stack("locked", "locked")
	st.Spec.RetryMaxBackoffDurationSeconds = 2 // keeps four conflicts to seconds
	s.create(st)

	// One conflict more than the three permanent failures that would stall it.
	s.waitLockedFailures("locked", 4)
	s.requireOnlyConflicts("locked")

	removeLock(t, lock)
	s.waitReady("locked")
	if got, err := s.readFile("locked.txt"); err != nil || got != "v1" {
		s.t.Fatalf("locked.txt = %q, %v; want v1 once the lock was released", got, err)
	}

	lock = s.plantLiveLock("locked", "locked")
	st = s.get(s.g, "locked")
	s.g.Expect(env.Client.Delete(s.ctx(), st)).To(Succeed())
	s.waitLockedFailures("locked", 4)
	removeLock(t, lock)
	s.waitGone(st)
	s.requireDestroyed("locked.txt")
}

// waitLockedFailures waits until the Stack has met the lock at least n times in a row and
// is waiting for it: Reconciling with reason UpdateConflict, its message naming the
// holder, and not Stalled.
func (s *scenario) waitLockedFailures(name string, n int64) {
	s.t.Helper()
	holder := fmt.Sprintf("(pid %d)", os.Getpid())
	s.eventually(func(g Gomega) {
		st := s.get(g, name)
		g.Expect(st.Status.LastUpdate).NotTo(BeNil())
		g.Expect(st.Status.LastUpdate.Failures).To(BeNumerically(">=", n))
		c := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionReconciling)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(pulumiv1.ReasonUpdateConflict))
		g.Expect(c.Message).To(ContainSubstring(holder))
		g.Expect(apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionStalled)).To(BeFalse())
		g.Expect(st.Status.Stackwright.PermanentFailures).To(BeZero())
	})
}

// requireOnlyConflicts fails unless every failed Update of the Stack failed on the lock.
func (s *scenario) requireOnlyConflicts(name string) {
	s.t.Helper()
	for _, u := range s.updates(name) {
		c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete)
		if u.Status.Phase == v1alpha1.UpdatePhaseFailed && (c == nil || c.Reason != v1alpha1.ReasonUpdateConflict) {
			s.t.Errorf("Update %s failed with %v; want only %s", u.Name, c, v1alpha1.ReasonUpdateConflict)
		}
	}
}

// plantLiveLock locks a pulumi stack of the namespace's default backend as a `pulumi up`
// of this host would, with the test binary's pid: a holder that is alive for the whole
// test, so Stackwright must not remove it.
func (s *scenario) plantLiveLock(project, stack string) string {
	s.t.Helper()
	host, err := os.Hostname()
	if err != nil {
		s.t.Fatal(err)
	}
	dir := filepath.Join(managerDir, "state", s.ns, ".pulumi", "locks", "organization", project, stack)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.t.Fatal(err)
	}
	path := filepath.Join(dir, "7a1c3e5f-2b4d-4f6a-8c0e-1d3f5a7b9c2e.json")
	lock := fmt.Sprintf(`{"pid":%d,"username":"someone","hostname":%q,"timestamp":%q}`, os.Getpid(), host, metav1.Now().UTC().Format("2006-01-02T15:04:05Z"))
	if err := os.WriteFile(path, []byte(lock), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return path
}

func removeLock(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}
