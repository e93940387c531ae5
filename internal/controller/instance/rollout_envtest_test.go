package instance_test

import (
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// A StackRollout of template revisions with a preview gate (its status written here, as its
// controller would) has the instance's Stack rendered from the target for the preview only,
// in one write with the annotations that tell the Stack controller so; the instance keeps
// its revision (in its status, and in the template, which keeps that revision). The Stack
// stays so until its wave opens, and then only its annotation changes: the spec previewed
// is the spec applied. Once the target is stable, nothing of the preview is left.
func TestController_Instance_RolloutPreviewGateRendersTheTargetForThePreviewOnly(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.g
	ctx := t.Context()
	tmpl := s.template(group, "Gauge", `{"stack":"g","programRef":{"name":"gauge"},"config":{"flavour":"one"}}`)
	s.serve(tmpl)
	first := tmpl.Status.Revision
	inst := s.instance(tmpl, "meter", `{}`)
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
	st := s.waitStack(inst, "the instance runs the first revision", func(g Gomega, st *pulumiv1.Stack) {
		g.Expect(st.Labels).To(HaveKeyWithValue(v1alpha1.TemplateRevisionLabel, strconv.FormatInt(first, 10)))
	})
	s.stackReady(st)

	// A rollout with no status yet keeps the Stack where it is, whatever the template serves.
	ro := &v1alpha1.StackRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.platform, Name: "gauges"},
		Spec: v1alpha1.StackRolloutSpec{
			Template: &v1alpha1.RolloutTemplate{Name: tmpl.Name},
			Waves:    v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: v1alpha1.InstanceNamespaceLabel, Values: []string{s.Namespace}}},
			Gates:    v1alpha1.RolloutGates{Preview: &v1alpha1.RolloutPreviewGate{NoDeletes: true}},
		},
	}
	g.Expect(env.Client.Create(ctx, ro)).To(Succeed())
	before := tmpl.DeepCopy()
	tmpl.Spec.Stack = apiextensionsv1.JSON{Raw: []byte(`{"stack":"g","programRef":{"name":"gauge"},"config":{"flavour":"two"}}`)}
	g.Expect(env.Client.Patch(ctx, tmpl, client.MergeFrom(before))).To(Succeed())
	s.waitTemplate(tmpl, "the second revision is served", func(g Gomega) { g.Expect(tmpl.Status.Revision).To(BeNumerically(">", first)) })
	second := tmpl.Status.Revision
	setRollout := func(status v1alpha1.StackRolloutStatus) {
		t.Helper()
		g.Eventually(func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ro), ro); err != nil {
				return err
			}
			ro.Status = status
			return env.Client.Status().Update(ctx, ro)
		}).Should(Succeed())
	}
	rev := func(n int64) *v1alpha1.RolloutRevision {
		return &v1alpha1.RolloutRevision{Revision: strconv.FormatInt(n, 10), Digest: "sha256:" + strconv.FormatInt(n, 10)}
	}
	wave := func(state v1alpha1.WaveState, released int32) []v1alpha1.RolloutWaveStatus {
		return []v1alpha1.RolloutWaveStatus{{Name: s.Namespace, Stacks: []string{st.Name}, State: state, Released: released}}
	}
	// Without a stable revision, only the Stack's held revision keeps the first one.
	setRollout(v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutProgressing, Target: rev(second), Waves: wave(v1alpha1.WavePreviewing, 0)})
	previewing := s.waitStack(inst, "the Stack is rendered from the target to preview it", func(g Gomega, st *pulumiv1.Stack) {
		g.Expect(st.Labels).To(HaveKeyWithValue(v1alpha1.TemplateRevisionLabel, strconv.FormatInt(second, 10)))
		g.Expect(st.Annotations).To(HaveKeyWithValue(v1alpha1.RolloutPreviewAnnotation, v1alpha1.RolloutPreviewOnly))
		g.Expect(st.Annotations).To(HaveKeyWithValue(v1alpha1.TemplateRevisionHeldAnnotation, strconv.FormatInt(first, 10)))
		g.Expect(string(st.Spec.Config["flavour"].Raw)).To(Equal(`"two"`))
	})
	s.waitTemplate(tmpl, "the instance counts as behind, and its revision is kept", func(g Gomega) {
		g.Expect(tmpl.Status.InstancesBehind).To(BeEquivalentTo(1))
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: v1alpha1.RevisionName(tmpl.Name, first)}, &v1alpha1.StackTemplateRevision{})).To(Succeed())
	})
	g.Eventually(func(g Gomega) {
		got := inst.DeepCopy()
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), got)).To(Succeed())
		rev, _, _ := unstructured.NestedInt64(got.Object, "status", "templateRevision")
		g.Expect(rev).To(Equal(first))
	}).WithTimeout(waitTimeout).WithPolling(waitPolling).Should(Succeed(), "the instance shows the revision it has")

	// The previews passed and the wave's Stacks are not released yet: the Stack stays.
	setRollout(v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutProgressing, Target: rev(second), Waves: wave(v1alpha1.WaveUpdating, 0)})
	// Its wave opens: the Stack applies exactly the spec it previewed.
	setRollout(v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutProgressing, Target: rev(second), Waves: wave(v1alpha1.WaveUpdating, 1)})
	opened := s.waitStack(inst, "the open wave's Stack is held to its preview's plan", func(g Gomega, st *pulumiv1.Stack) {
		g.Expect(st.Annotations).To(HaveKeyWithValue(v1alpha1.RolloutPreviewAnnotation, v1alpha1.RolloutPreviewApply))
		g.Expect(st.Annotations).NotTo(HaveKey(v1alpha1.TemplateRevisionHeldAnnotation))
	})
	if opened.Generation != previewing.Generation {
		t.Errorf("opening the wave changed the Stack's spec (generation %d, previewed at %d)", opened.Generation, previewing.Generation)
	}

	setRollout(v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutIdle, Stable: rev(second), Waves: wave(v1alpha1.WaveDone, 1)})
	done := s.waitStack(inst, "a stable target leaves nothing of the preview", func(g Gomega, st *pulumiv1.Stack) {
		g.Expect(st.Annotations).NotTo(HaveKey(v1alpha1.RolloutPreviewAnnotation))
		g.Expect(st.Labels).To(HaveKeyWithValue(v1alpha1.TemplateRevisionLabel, strconv.FormatInt(second, 10)))
	})
	if done.Generation != previewing.Generation {
		t.Errorf("completing the rollout changed the Stack's spec (generation %d, previewed at %d)", done.Generation, previewing.Generation)
	}
}
