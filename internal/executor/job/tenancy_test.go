package job_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// metricSum adds up the series of a metric family of the manager's registry whose labels
// include match.
func metricSum(t *testing.T, name string, match map[string]string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range match {
				if labels[k] != v {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// Under the Job executor no engine ever runs in the manager's process: a destroy in a
// terminating namespace, where no runner Pod can be created, releases the Stack with its
// resources kept (and says so) instead of running the tenant's destroy as the manager.
func TestExecutor_Delete_TerminatingNamespaceRunsNoEngineInManager(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.filesStack("doomed", nil)
	st := s.waitReady("doomed")
	file := filepath.Join(s.files, "doomed.txt")
	_, err := os.Stat(file)
	s.g.Expect(err).NotTo(HaveOccurred(), "the runner did not create the file")

	// envtest runs no namespace controller: the namespace stays Terminating, refusing new
	// objects (Updates, Jobs), and deletes nothing.
	s.g.Expect(env.Client.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}})).To(Succeed())
	s.g.Expect(env.Client.Delete(t.Context(), st)).To(Succeed())
	s.WaitGone(&pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}})

	_, err = os.Stat(file)
	s.g.Expect(err).NotTo(HaveOccurred(), "the resources were destroyed: an engine ran somewhere")
	s.g.Expect(metricSum(t, "stackwright_manager_engine_runs_total", nil)).To(BeZero(), "an engine ran in the manager's process")
	s.g.Expect(metricSum(t, "stackwright_stack_resources_kept_total", map[string]string{"namespace": s.Namespace})).To(Equal(1.0))
	var kept []string
	for _, line := range strings.Split(kubetest.Logs.String(), "\n") {
		if strings.Contains(line, "Released finalizer without destroy") && strings.Contains(line, s.Namespace) {
			kept = append(kept, line)
		}
	}
	s.g.Expect(kept).To(ConsistOf(ContainSubstring("the job executor runs every destroy in a runner Pod")))
}
