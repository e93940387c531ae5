package job_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/executor"
	"github.com/stackwright/stackwright/internal/executor/job"
)

// claimRunner claims and records as the manager's runner does, and resolves every Update
// to its Stack with an empty request: what these tests look at happens before any run.
type claimRunner struct{ client client.Client }

func (r claimRunner) Claim(ctx context.Context, u *v1alpha1.Update, runner string) (bool, error) {
	if u.Status.Phase != "" && u.Status.Phase != v1alpha1.UpdatePhasePending {
		return false, nil
	}
	u = u.DeepCopy()
	u.MarkRunning(runner, metav1.Now())
	if err := r.client.Status().Update(ctx, u); err != nil {
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func (r claimRunner) Request(ctx context.Context, u *v1alpha1.Update) (*pulumiv1.Stack, engine.Request, error) {
	st := &pulumiv1.Stack{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: u.Spec.StackName}, st)
	return st, engine.Request{}, err
}

func (r claimRunner) Record(ctx context.Context, base, u *v1alpha1.Update, _ engine.Result) error {
	return r.client.Status().Patch(ctx, u, client.MergeFrom(base))
}

// A runner Pod no node can take stays Pending until the Job's deadline. Past the pending
// timeout the executor finds it not started, saying what the scheduler said (the Update
// controller then fails its Update, retryable); its Job goes, and its slot goes to the
// next Update.
func TestExecutor_PendingTimeout_UnschedulableRunnerFreesItsSlot(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	// The stand-in kubelet leaves this Stack's Jobs alone, and the suite's manager makes
	// no Update of it (its Program does not exist): the Updates are this test's own, run
	// by an executor of its own with a single slot.
	s.Create(&pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Annotations: map[string]string{skipAnnotation: "true"}},
		Spec:       pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "missing"}},
	})
	first := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: "big-1"}, Spec: v1alpha1.UpdateSpec{StackName: "big", Type: v1alpha1.UpdateTypeUp}}
	second := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: "big-2"}, Spec: v1alpha1.UpdateSpec{StackName: "big", Type: v1alpha1.UpdateTypeUp}}
	s.Create(first)
	s.Create(second)

	// Namespaced, so that the executor adopts no other test's running Updates.
	c := client.NewNamespacedClient(env.Client, s.Namespace)
	const timeout = 4 * time.Second
	e, err := job.New(c, env.Client, claimRunner{client: c}, nil, job.Options{
		Pod:        job.PodOptions{Image: "example.com/runner:test", Deadline: 3600, TTL: 600, TokenExpiry: 4200, Resources: job.DefaultResources()},
		MaxRunning: 1, PendingTimeout: timeout, LostGrace: 500 * time.Millisecond,
		URL: "https://127.0.0.1:1", CertDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("executor: %v", err)
		}
	})
	e.Submit(first)
	e.Submit(second)

	ctxT := t.Context()
	j := &batchv1.Job{}
	s.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctxT, client.ObjectKey{Namespace: s.Namespace, Name: job.JobName(first.Name)}, j)).To(Succeed())
	})
	queued, running := e.Pending()
	if diff := cmp.Diff([]int{1, 1}, []int{queued, running}); diff != "" {
		t.Errorf("queued, running (-want +got): %s; the second Update waits for the only slot", diff)
	}

	// The Job controller makes the Pod; the scheduler finds no node for it.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: j.Name + "-", Namespace: j.Namespace, Labels: j.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: j.Spec.Template.Spec,
	}
	if err := env.Client.Create(ctxT, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodPending
	pod.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient cpu.", LastTransitionTime: metav1.Now(),
	}}
	if err := env.Client.Status().Update(ctxT, pod); err != nil {
		t.Fatal(err)
	}

	// What the Update controller asks of every Running Update.
	u := &v1alpha1.Update{}
	var v executor.Verdict
	s.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctxT, client.ObjectKeyFromObject(first), u)).To(Succeed())
		v = e.Check(ctxT, u)
		g.Expect(v.NotStarted).NotTo(BeEmpty())
	})
	want := executor.Verdict{NotStarted: "its runner Pod was not scheduled within 4s: 0/1 nodes are available: 1 Insufficient cpu."}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("verdict (-want +got):\n%s", diff)
	}
	if took := time.Since(u.Status.StartTime.Time); took < timeout {
		t.Errorf("the runner was found not started %s after its claim, before the timeout of %s", took, timeout)
	}

	s.Eventually(func(g Gomega) {
		err := env.Client.Get(ctxT, client.ObjectKeyFromObject(j), &batchv1.Job{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the runner Job was not deleted: %v", err)
	})
	// The freed slot goes to the second Update.
	s.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctxT, client.ObjectKey{Namespace: s.Namespace, Name: job.JobName(second.Name)}, &batchv1.Job{})).To(Succeed())
		u2 := &v1alpha1.Update{}
		g.Expect(env.Client.Get(ctxT, client.ObjectKeyFromObject(second), u2)).To(Succeed())
		g.Expect(u2.Status.Phase).To(Equal(v1alpha1.UpdatePhaseRunning))
	})
}
