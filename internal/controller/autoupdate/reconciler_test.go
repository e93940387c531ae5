package autoupdate_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/autoupdate"
)

func stack(name string) *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "p"}},
	}
}

func request(name, workspace string) *autov1alpha1.Update {
	return &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: workspace, Type: autov1alpha1.RefreshType},
	}
}

// A request for an existing Stack is queued for it; once the Stack is gone, the request,
// which nothing will run any more, completes as refused.
func TestReconciler_Reconcile_QueuedThenRefusedWhenItsStackGoes(t *testing.T) {
	s := env.Scenario(t)
	st := stack("web")
	s.Create(st)
	req := request("look", "web")
	s.Create(req)
	s.WaitCondition(req, autov1alpha1.ConditionProgressing, metav1.ConditionTrue, autoupdate.ReasonQueued)

	if err := env.Client.Delete(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	s.WaitCondition(req, autov1alpha1.ConditionComplete, metav1.ConditionTrue, autoupdate.ReasonRefused)
	failed := apimeta.FindStatusCondition(req.Status.Conditions, autov1alpha1.ConditionFailed)
	NewWithT(t).Expect(failed.Reason).To(Equal(autoupdate.ReasonStackNotFound))
	NewWithT(t).Expect(req.Status.EndTime.IsZero()).To(BeFalse())
}

// A running request is its Stack's: this controller refuses nothing under it, even once
// the Stack is gone (the Stack's deletion waits for its Update, then records the result).
func TestReconciler_Reconcile_LeavesARunningRequestToItsStack(t *testing.T) {
	s := env.Scenario(t)
	st := stack("api")
	s.Create(st)
	req := request("running", "api")
	s.Create(req)
	s.WaitCondition(req, autov1alpha1.ConditionProgressing, metav1.ConditionTrue, autoupdate.ReasonQueued)
	// As the Stack controller does once it has created the Update that runs it.
	autoupdate.MarkRunning(req, &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: "api-refresh-0123456789"}})
	if err := env.Client.Status().Update(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Consistently(func(g Gomega) {
		cur := &autov1alpha1.Update{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(req), cur)).To(Succeed())
		g.Expect(apimeta.FindStatusCondition(cur.Status.Conditions, autov1alpha1.ConditionProgressing).Reason).To(Equal(autoupdate.ReasonRunning))
	}).WithTimeout(2 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// A completed request with ttlAfterCompleted is deleted that long after it ended.
func TestReconciler_Reconcile_DeletesAfterTTL(t *testing.T) {
	s := env.Scenario(t)
	req := request("brief", "nowhere")
	req.Spec.TtlAfterCompleted = &metav1.Duration{Duration: time.Second}
	s.Create(req)
	s.WaitGone(req)
}
