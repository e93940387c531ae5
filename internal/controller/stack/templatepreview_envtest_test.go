package stack_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// An instance's Stack that a rollout of template revisions renders for its preview gate
// (the instance controller's stackwright.dev/rollout-preview: Preview, here set by hand)
// previews its change, which no policy judges, and applies nothing; once its wave opens
// (Apply), the up is held to exactly that preview's plan, without a second preview.
func TestStackReconciler_Reconcile_TemplateRolloutPreviewAppliesNothingUntilItsWaveOpens(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	prog := s.program("previewed", map[string]pulumiv1.Resource{"greeting": fileResource("previewed.txt", "v1")}, nil)
	s.create(prog)
	st := s.stack("previewed", "previewed")
	st.Annotations = map[string]string{v1alpha1.RolloutPreviewAnnotation: v1alpha1.RolloutPreviewOnly}
	s.create(st)

	got := s.waitCondition("previewed", pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonWaveClosed)
	a := got.Status.Stackwright.Approval
	if a == nil || a.State != pulumiv1.ApprovalApproved || a.Preview == "" {
		t.Fatalf("approval %+v; want the preview approved, as no policy judges it", a)
	}
	if _, err := s.readFile("previewed.txt"); err == nil {
		t.Fatal("the change was applied while the Stack only previews it")
	}
	for _, u := range s.updates("previewed") {
		if u.Spec.Type != v1alpha1.UpdateTypePreview {
			t.Fatalf("Update %s is a %s; want the preview only", u.Name, u.Spec.Type)
		}
	}
	preview := s.update(a.Preview)

	s.annotate(st, v1alpha1.RolloutPreviewAnnotation, v1alpha1.RolloutPreviewApply)
	got = s.waitReady("previewed")
	if content, err := s.readFile("previewed.txt"); err != nil || content != "v1" {
		t.Fatalf("previewed.txt = %q, %v; want v1", content, err)
	}
	up := s.update(got.Status.LastUpdate.Name)
	if up.Spec.Type != v1alpha1.UpdateTypeUp || up.Spec.Options == nil || up.Spec.Options.Plan != preview.Name {
		t.Errorf("last Update %s: %s with options %+v; want an up held to the plan of %s", up.Name, up.Spec.Type, up.Spec.Options, preview.Name)
	}
	if diff := cmp.Diff(stepKeys(preview), stepKeys(up)); diff != "" {
		t.Errorf("applied steps differ from the previewed ones (-previewed +applied):\n%s", diff)
	}
	var previews int
	for _, u := range s.updates("previewed") {
		if u.Spec.Type == v1alpha1.UpdateTypePreview {
			previews++
		}
	}
	if previews != 1 {
		t.Errorf("%d previews; want the one its wave judged", previews)
	}
}
