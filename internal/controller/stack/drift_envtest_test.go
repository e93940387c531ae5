package stack_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/stack"
)

// A scheduled drift check finds a hand edit of a deployed resource without changing it,
// autoRemediate puts the resource back with an update, and the next check finds nothing,
// leaving the Stack Ready; status.lastUpdate keeps describing deployments throughout. Every-minute
// schedules make this the slowest Stack test (up to three minutes, in parallel with the
// others).
func TestStackReconciler_DriftDetection_DetectsAndRemediates(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("drifty", map[string]pulumiv1.Resource{"f": fileResource("drifty.txt", "declared")}, nil))
	st := s.stack("drifty", "drifty")
	st.Spec.DriftDetection = &pulumiv1.DriftDetectionSpec{Schedules: []pulumiv1.DriftSchedule{{Cron: "* * * * *", AutoRemediate: true}}}
	s.create(st)
	s.waitReady("drifty")

	s.g.Expect(os.WriteFile(filepath.Join(s.files, "drifty.txt"), []byte("edited by hand"), 0o600)).To(Succeed())
	found := s.waitCondition("drifty", pulumiv1.ConditionDriftDetected, metav1.ConditionTrue, pulumiv1.ReasonDriftFound)
	s.g.Expect(apimeta.FindStatusCondition(found.Status.Conditions, pulumiv1.ConditionDriftDetected).Message).To(ContainSubstring("remediating with an update"))

	s.eventually(func(g Gomega) {
		content, err := s.readFile("drifty.txt")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(content).To(Equal("declared"))
	})
	st = s.waitCondition("drifty", pulumiv1.ConditionDriftDetected, metav1.ConditionFalse, pulumiv1.ReasonNoDrift)
	s.g.Expect(apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "a check leaves the Stack Ready")
	s.g.Expect(st.Status.LastUpdate.Type).To(Equal(string(v1alpha1.UpdateTypeUp)))
	s.g.Expect(st.Status.DriftDetection.LastCheck.Time).To(BeTemporally("~", time.Now(), 2*time.Minute))

	var ups, checks int
	for _, u := range s.updates("drifty") {
		switch u.Spec.Type {
		case v1alpha1.UpdateTypeUp:
			ups++
		case v1alpha1.UpdateTypeDrift:
			checks++
			s.g.Expect(u.Spec.Options.ExpectNoChanges).To(BeFalse())
		}
	}
	s.g.Expect(ups).To(Equal(2), "the first up and the remediation")
	s.g.Expect(checks).To(BeNumerically(">=", 2))
	s.kube.WaitEvent(found, "Warning", stack.EventDriftDetected)
	if n := driftChecksMetric(t, s.ns, "drift"); n < 1 {
		t.Errorf("stackwright_drift_checks_total{result=\"drift\"} = %v, want at least 1", n)
	}
	if n := driftChecksMetric(t, s.ns, "no_drift"); n < 1 {
		t.Errorf("stackwright_drift_checks_total{result=\"no_drift\"} = %v, want at least 1", n)
	}
}

// driftChecksMetric reads the drift check counter of a namespace from the registry the
// test's in-process manager serves.
func driftChecksMetric(t *testing.T, namespace, result string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatalf("failed to gather metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != "stackwright_drift_checks_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == namespace && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A deployed Stack that is suspended starts no drift check when its schedule comes due;
// once resumed, its checks follow the schedule again. It moves the controller's clock past
// the next slot rather than waiting up to a minute for it, so it does not run in parallel.
func TestStackReconciler_DriftDetection_SkippedWhileSuspended(t *testing.T) {
	s := newScenario(t)
	s.create(s.program("paused", map[string]pulumiv1.Resource{"f": fileResource("paused.txt", "declared")}, nil))
	st := s.stack("paused", "paused")
	st.Spec.DriftDetection = &pulumiv1.DriftDetectionSpec{Schedules: []pulumiv1.DriftSchedule{{Cron: "* * * * *"}}}
	s.create(st)
	st = s.waitReady("paused")
	s.patch(st, func() { st.Spec.Stackwright = &pulumiv1.StackwrightSpec{Suspend: true} })
	st = s.waitCondition("paused", pulumiv1.ConditionSuspended, metav1.ConditionTrue, pulumiv1.ReasonSuspended)

	checks := func() int {
		var n int
		for _, u := range s.updates("paused") {
			if u.Spec.Type == v1alpha1.UpdateTypeDrift {
				n++
			}
		}
		return n
	}
	// A slot may have come due between Ready and the suspension; only later ones count.
	before := checks()
	clock.advance(t, 70*time.Second)
	// A new annotation makes the Stack reconcile now, past its next slot.
	s.patch(st, func() { st.Annotations = map[string]string{"test.stackwright.dev/poke": "1"} })
	s.g.Consistently(checks).WithTimeout(3*time.Second).WithPolling(200*time.Millisecond).Should(Equal(before), "a suspended Stack started a drift check")

	st = s.get(s.g, "paused")
	s.patch(st, func() { st.Spec.Stackwright = nil })
	s.eventually(func(g Gomega) { g.Expect(checks()).To(BeNumerically(">", before)) })
}
