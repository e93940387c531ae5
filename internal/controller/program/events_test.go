package program_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/controller/program"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// announced is the recorder of every manager of the package's tests: it reads each
// Program from the API server (not the cache) as its event comes, and keeps the event as
// unwritten when the Program's Ready condition does not yet say what the event does.
var announced *kubetest.Recorder[*pulumiv1.Program]

// readySays says how the stored Program's Ready condition falls short of the event's
// message.
func readySays(e kubetest.Event, _, stored *pulumiv1.Program) error {
	if ready := conditions.Get(stored, pulumiv1.ConditionReady); ready == nil || ready.Message != e.Message {
		return fmt.Errorf("emitted before its Ready condition said %q", e.Message)
	}
	return nil
}

// Every event of the Program controller follows the status it announces: the recorder finds
// the Ready condition saying it when the event comes (for every test of the package; this
// one makes sure the reason was seen).
func TestReconciler_Events_FollowTheStatusTheyAnnounce(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	p := newProgram("announced", filesSpec(`"${message}"`))
	s.Create(p)
	s.WaitCondition(p, pulumiv1.ConditionReady, metav1.ConditionTrue, "")
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(announced.Count("", "", program.EventReasonArtifactReady)).To(BeNumerically(">", 0))
	}).Should(Succeed())
	NewWithT(t).Expect(announced.Unwritten("")).To(BeEmpty())
}
