package stack_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
}
