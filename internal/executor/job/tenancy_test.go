package job_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/executor/job"
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

// Under the Job executor no engine ever runs in the manager's process. A Stack deleted
// with its namespace, where no Update or runner Pod can be created, is destroyed by a
// runner Job in the manager's namespace: as a ServiceAccount without rights whose token is
// not mounted, with the Stack's passphrase, which the namespace's deletion would have
// taken had its finalizer not kept it.
func TestExecutor_Delete_TerminatingNamespaceDestroysInManagerNamespace(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.filesStack("doomed", nil)
	st := s.waitReady("doomed")
	file := filepath.Join(s.files, "doomed.txt")
	_, err := os.Stat(file)
	s.g.Expect(err).NotTo(HaveOccurred(), "the runner did not create the file")
	pass := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "doomed-pass"}}
	s.g.Eventually(func(g Gomega) {
		g.Expect(s.Get(pass)).To(Succeed())
		g.Expect(pass.Finalizers).To(ContainElement(pulumiv1.InputsFinalizer))
	}).Should(Succeed())

	// envtest runs no namespace controller: the namespace stays Terminating, refusing new
	// objects (Updates, Jobs), and the test deletes what the controller would.
	s.g.Expect(env.Client.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}})).To(Succeed())
	s.g.Expect(env.Client.Delete(t.Context(), pass)).To(Succeed())
	s.g.Expect(env.Client.Delete(t.Context(), st)).To(Succeed())
	s.WaitGone(&pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}})

	_, err = os.Stat(file)
	s.g.Expect(err).To(MatchError(os.ErrNotExist), "the destroy did not run")
	s.WaitGone(pass)
	s.g.Expect(metricSum(t, "stackwright_manager_engine_runs_total", nil)).To(BeZero(), "an engine ran in the manager's process")
	s.g.Expect(metricSum(t, "stackwright_stack_resources_kept_total", map[string]string{"namespace": s.Namespace})).To(BeZero())

	var jobs batchv1.JobList
	s.g.Expect(env.Client.List(t.Context(), &jobs, client.InNamespace(managerNamespace), client.MatchingLabels{job.LabelDetached: "true"})).To(Succeed())
	var ran []batchv1.Job
	for _, j := range jobs.Items {
		if strings.Contains(j.Annotations["stackwright.dev/detached-update"], `"namespace":"`+s.Namespace+`"`) {
			ran = append(ran, j)
		}
	}
	s.g.Expect(ran).To(HaveLen(1), "one detached runner Job")
	pod := ran[0].Spec.Template.Spec
	s.g.Expect(pod.ServiceAccountName).To(Equal("stackwright-detached-runner"))
	s.g.Expect(pod.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
	s.g.Expect(ran[0].OwnerReferences).To(BeEmpty())
	// The work Secret, which held the passphrase, is gone with the run.
	s.g.Eventually(func() error {
		return env.Client.Get(t.Context(), client.ObjectKey{Namespace: managerNamespace, Name: ran[0].Name + "-work"}, &corev1.Secret{})
	}).Should(MatchError(ContainSubstring("not found")))
}
