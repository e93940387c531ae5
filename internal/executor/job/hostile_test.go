package job_test

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/executor/job"
)

// These tests play a hostile Stack author: one who may create objects in the Stack's
// namespace and whose runner Pod says what it likes.

// heldUpdate creates a Stack whose runner the stand-in kubelet holds, and returns its
// running Update and that Update's Job.
func (s *scenario) heldUpdate(name string) (v1alpha1.Update, batchv1.Job) {
	s.t.Helper()
	s.filesStack(name, map[string]string{skipAnnotation: "true"})
	var u v1alpha1.Update
	var j batchv1.Job
	s.Eventually(func(g Gomega) {
		ups := s.updates()
		g.Expect(ups).To(HaveLen(1))
		u = ups[0]
		g.Expect(u.Status.Phase).To(Equal(v1alpha1.UpdatePhaseRunning))
		g.Expect(env.Client.Get(s.t.Context(), client.ObjectKey{Namespace: s.Namespace, Name: job.JobName(u.Name)}, &j)).To(Succeed())
	})
	return u, j
}

// attemptName is the name of the Update of the Stack's attempt n at the desired state of
// first: the Stack names its retries predictably.
func attemptName(first *v1alpha1.Update, n int32) string {
	return strings.TrimSuffix(first.Name, fmt.Sprint("-", first.Spec.Attempt)) + fmt.Sprint("-", n)
}

// plantForRetries puts plant's objects in the way of the Stack's next attempts after
// first, enough of them for the Stack to stall: every retry fails at once, and none
// holds one of the suite manager's few runner slots, as a held run would for good. It
// returns the planted objects, by attempt from first's next on.
func (s *scenario) plantForRetries(first *v1alpha1.Update, plant func(update string) client.Object) []client.Object {
	s.t.Helper()
	var planted []client.Object
	// stall-after-failures is 3; one more in case the lost first run counts differently.
	for n := first.Spec.Attempt + 1; n <= first.Spec.Attempt+4; n++ {
		obj := plant(attemptName(first, n))
		s.Create(obj)
		planted = append(planted, obj)
	}
	return planted
}

// plantWorkSecret is a tenant's Secret under the name of update's work Secret, with a
// work document of its own.
func plantWorkSecret(update string) client.Object {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: job.WorkSecretName(update), Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}},
		StringData: map[string]string{job.WorkFile: `{"managerURL":"https://attacker.example.com"}`},
	}
}

// plantJob is a tenant's Job under the name of update's runner Job. It lacks
// Stackwright's label, which the stand-in kubelet would run it by.
func plantJob(update string) client.Object {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: job.JobName(update)},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "attacker.example.com/runner"}},
		}}},
	}
}

// finished waits for the Update name to finish and returns it.
func (s *scenario) finished(name string) *v1alpha1.Update {
	s.t.Helper()
	u := &v1alpha1.Update{}
	s.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(s.t.Context(), client.ObjectKey{Namespace: s.Namespace, Name: name}, u)).To(Succeed())
		g.Expect(u.Status.Finished()).To(BeTrue())
	})
	return u
}

// outcome is what the tests check of a finished Update.
type outcome struct {
	Phase                v1alpha1.UpdatePhase
	Reason, Message      string
	Stalled, Reconciling bool
}

func outcomeOf(u *v1alpha1.Update) outcome {
	o := outcome{
		Phase:       u.Status.Phase,
		Stalled:     apimeta.IsStatusConditionTrue(u.Status.Conditions, v1alpha1.ConditionStalled),
		Reconciling: apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionReconciling) != nil,
	}
	if c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete); c != nil {
		o.Reason, o.Message = c.Reason, c.Message
	}
	return o
}

// A tenant who creates, under the name Stackwright will give them, a work Secret (with a
// work document of its own) or a runner Job, before the Update is started: the Update
// fails saying so, and the object is neither used nor changed.
func TestExecutor_PlantedRunnerObjects_UpdateFailsAndObjectUntouched(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		what  string
		plant func(update string) client.Object
		// other is the runner object the refused Update must not leave behind.
		other func(update string) client.Object
	}{
		{
			name: "Secret under the work Secret's name", what: "work Secret", plant: plantWorkSecret,
			other: func(update string) client.Object {
				return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: job.JobName(update)}}
			},
		},
		{
			name: "Job under the runner Job's name", what: "runner Job", plant: plantJob,
			other: func(update string) client.Object {
				return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: job.WorkSecretName(update)}}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newScenario(t)
			first, firstJob := s.heldUpdate("planted")
			planted := s.plantForRetries(&first, tc.plant)
			versions := make([]string, len(planted))
			for i, obj := range planted {
				versions[i] = obj.GetResourceVersion()
			}
			// The first run is lost; the Stack retries.
			if err := env.Client.Delete(t.Context(), &firstJob, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
				t.Fatal(err)
			}

			next := attemptName(&first, first.Spec.Attempt+1)
			got := outcomeOf(s.finished(next))
			msg := fmt.Sprintf("%s %s already exists and was not created by Stackwright for Update %s: Stackwright refuses to use it (delete it, or stop creating objects under that name)", tc.what, planted[0].GetName(), next)
			want := outcome{Phase: v1alpha1.UpdatePhaseFailed, Reason: v1alpha1.ReasonPermanentFailure, Message: msg, Stalled: true}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Update %s (-want +got):\n%s", next, diff)
			}
			if err := s.Get(tc.other(next)); !apierrors.IsNotFound(err) {
				t.Errorf("the refused Update left %s behind: %v", tc.other(next).GetName(), err)
			}
			// Every retry is refused alike, until the Stack stalls.
			s.WaitCondition(&pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "planted"}}, pulumiv1.ConditionStalled, metav1.ConditionTrue, "")
			for i, obj := range planted {
				if err := s.Get(obj); err != nil {
					t.Fatal(err)
				}
				if obj.GetResourceVersion() != versions[i] {
					t.Errorf("the planted %s %s was changed: resourceVersion %s, was %s", tc.what, obj.GetName(), obj.GetResourceVersion(), versions[i])
				}
			}
		})
	}
}

// A runner Pod that reports what runner.Finish never would, or more than the manager
// reads: its Update fails, permanently, saying why, and is Stalled and no longer
// Reconciling like any failed Update.
func TestServer_Result_HostileReportFailsUpdate(t *testing.T) {
	t.Parallel()
	complete := `"conditions":[{"type":"Complete","status":"True","reason":"Succeeded","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}]`
	for _, tc := range []struct {
		name    string
		body    func(uid string) string
		status  int
		message string
	}{
		{
			name: "larger than the manager reads",
			body: func(uid string) string {
				return `{"updateUID":"` + uid + `","status":{"message":"` + strings.Repeat("x", 9<<20) + `"}}`
			},
			status:  http.StatusRequestEntityTooLarge,
			message: "the runner's report was too large to record: it has more than 8388608 bytes",
		},
		{
			name: "an outcome runner.Finish never reports",
			body: func(uid string) string {
				return `{"updateUID":"` + uid + `","status":{"phase":"Running","result":"succeeded",` + complete + `}}`
			},
			status:  http.StatusNoContent,
			message: `the runner's report is invalid: phase "Running", result "succeeded", Complete condition "True" with reason "Succeeded"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newScenario(t)
			u, j := s.heldUpdate("hostile")
			s.plantForRetries(&u, plantWorkSecret)
			_, token, err := kubelet.startPod(t.Context(), &j)
			if err != nil {
				t.Fatal(err)
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, apiURL+"/v1/results/"+s.Namespace+"/"+u.Name, bytes.NewReader([]byte(tc.body(string(u.UID)))))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test checks the server's answers, not its identity
			resp, err := hc.Do(req)
			switch {
			case err != nil && tc.status == http.StatusRequestEntityTooLarge:
				// The server closes the connection on a body it stopped reading; the client
				// may see that before the answer.
				t.Logf("report: %v", err)
			case err != nil:
				t.Fatal(err)
			default:
				_ = resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Errorf("status = %d; want %d", resp.StatusCode, tc.status)
				}
			}

			got := outcomeOf(s.finished(u.Name))
			want := outcome{Phase: v1alpha1.UpdatePhaseFailed, Reason: v1alpha1.ReasonPermanentFailure, Message: tc.message, Stalled: true}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Update (-want +got):\n%s", diff)
			}
		})
	}
}
