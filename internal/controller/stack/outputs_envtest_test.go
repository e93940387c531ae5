package stack_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/stack"
)

// helloSHA256 is the sha256 of "hello", the content of the producer's file.
const helloSHA256 = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

// Outputs are published after a successful update: every output to the Secret, the
// non-secret ones to the ConfigMap, strings as their text and other values as JSON. Another
// Stack reads them through configRef, and objects edited or deleted by hand are put back.
func TestStackReconciler_OutputsExport_PublishesForConsumers(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	prog := s.program("producer", map[string]pulumiv1.Resource{
		"greeting": fileResource("greeting.txt", "hello"),
		"token":    randomResource(24),
	}, map[string]string{"digest": "${greeting.sha256}", "token": "${token.result}"})
	prog.Program.Outputs["shape"] = apiextensionsv1.JSON{Raw: []byte(`{"sides":4}`)}
	s.create(prog)
	producer := s.stack("producer", "producer")
	producer.Spec.Stackwright = &pulumiv1.StackwrightSpec{Outputs: &pulumiv1.OutputsExport{SecretName: "producer-outputs", ConfigMapName: "producer-outputs"}}
	s.create(producer)

	consumerProg := s.program("consumer", map[string]pulumiv1.Resource{"copy": fileResource("copy.txt", "${digest}")}, nil)
	consumerProg.Program.Configuration = map[string]pulumiv1.Configuration{"digest": {Type: pulumiv1.ConfigType("String")}}
	s.create(consumerProg)
	consumer := s.stack("consumer", "consumer")
	consumer.Spec.Prerequisites = []pulumiv1.PrerequisiteRef{{Name: "producer"}}
	consumer.Spec.ConfigRef = map[string]pulumiv1.ConfigMapRef{"digest": {Name: "producer-outputs", Key: "digest"}}
	s.create(consumer)

	st := s.waitReady("producer")
	want := &pulumiv1.OutputsExportStatus{SecretName: "producer-outputs", ConfigMapName: "producer-outputs", Update: st.Status.LastUpdate.Name}
	if diff := cmp.Diff(want, st.Status.OutputsExport, cmpIgnoreTime()); diff != "" {
		t.Errorf("status.outputsExport (-want +got):\n%s", diff)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "producer-outputs"}}
	if err := s.kube.Get(cm); err != nil {
		t.Fatalf("failed to get ConfigMap: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"digest": helloSHA256, "shape": `{"sides":4}`}, cm.Data); diff != "" {
		t.Errorf("ConfigMap holds (-want +got), secret outputs must not be there:\n%s", diff)
	}
	if !metav1.IsControlledBy(cm, st) || cm.Annotations[stack.ExportedFromAnnotation] != st.Status.LastUpdate.Name || cm.Labels[v1alpha1.StackLabel] != "producer" {
		t.Errorf("ConfigMap is not marked as the Stack's: owners %v, annotations %v, labels %v", cm.OwnerReferences, cm.Annotations, cm.Labels)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "producer-outputs"}}
	if err := s.kube.Get(sec); err != nil {
		t.Fatalf("failed to get Secret: %v", err)
	}
	if got := string(sec.Data["digest"]); got != helloSHA256 {
		t.Errorf("Secret digest = %q, want %q", got, helloSHA256)
	}
	if got := string(sec.Data["token"]); len(got) != 24 {
		t.Errorf("Secret token = %q, want the 24 characters of the secret output", got)
	}
	s.kube.WaitEvent(st, corev1.EventTypeNormal, stack.EventOutputsExported)

	// The consumer waited for its prerequisite, then read the published digest.
	s.waitReady("consumer")
	if got, err := s.readFile("copy.txt"); err != nil || got != helloSHA256 {
		t.Errorf("consumer wrote %q (%v), want the producer's digest", got, err)
	}

	// Hand edits and deletions are undone.
	s.patch(cm, func() { cm.Data["digest"] = "edited" })
	if err := env.Client.Delete(s.ctx(), sec); err != nil {
		t.Fatalf("failed to delete Secret: %v", err)
	}
	s.eventually(func(g Gomega) {
		got := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "producer-outputs"}}
		g.Expect(s.kube.Get(got)).To(Succeed())
		g.Expect(got.Data).To(HaveKeyWithValue("digest", helloSHA256))
		again := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "producer-outputs"}}
		g.Expect(s.kube.Get(again)).To(Succeed())
		g.Expect(again.Data).To(HaveKey("token"))
	})
}

// An object of the chosen name that the Stack did not create is never overwritten: the
// Stack stalls until that object is gone, and then publishes at once. Renaming deletes
// what was published under the old name, and dropping the setting deletes the rest. A
// field the Stack sets that is not applied is announced by a Warning event.
func TestStackReconciler_OutputsExport_RefusesForeignObjectsAndCleansUp(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: s.ns}, Data: map[string]string{"mine": "yes"}}
	s.create(foreign)
	s.create(s.program("files", map[string]pulumiv1.Resource{"f": fileResource("f.txt", "hello")}, map[string]string{"digest": "${f.sha256}"}))
	st := s.stack("files", "files")
	st.Spec.WorkspaceReclaimPolicy = pulumiv1.WorkspaceReclaimRetain
	st.Spec.Stackwright = &pulumiv1.StackwrightSpec{Outputs: &pulumiv1.OutputsExport{ConfigMapName: "taken"}}
	s.create(st)

	stalled := s.waitCondition("files", pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonOutputsExportConflict)
	s.kube.WaitEvent(stalled, corev1.EventTypeWarning, stack.EventFieldsIgnored)
	if err := s.kube.Get(foreign); err != nil {
		t.Fatalf("failed to get ConfigMap: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"mine": "yes"}, foreign.Data); diff != "" || len(foreign.OwnerReferences) > 0 {
		t.Errorf("foreign ConfigMap changed (-want +got):\n%s owners %v", diff, foreign.OwnerReferences)
	}

	// Its deletion alone, with no change to the Stack, releases the Stack.
	if err := env.Client.Delete(s.ctx(), foreign); err != nil {
		t.Fatalf("failed to delete ConfigMap: %v", err)
	}
	st = s.waitReady("files")
	if st.Generation != stalled.Generation {
		t.Errorf("generation moved from %d to %d", stalled.Generation, st.Generation)
	}
	taken := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken"}}
	if err := s.kube.Get(taken); err != nil {
		t.Fatalf("failed to get ConfigMap: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"digest": helloSHA256}, taken.Data); diff != "" || !metav1.IsControlledBy(taken, st) {
		t.Errorf("ConfigMap taken holds (-want +got):\n%s owners %v", diff, taken.OwnerReferences)
	}

	s.patch(st, func() { st.Spec.Stackwright.Outputs.ConfigMapName = "second" })
	s.waitReady("files")
	s.kube.WaitGone(taken)
	second := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "second"}}
	if err := s.kube.Get(second); err != nil {
		t.Fatalf("failed to get ConfigMap: %v", err)
	}

	dropped := s.get(s.g, "files")
	s.patch(dropped, func() { dropped.Spec.Stackwright.Outputs = nil })
	st = s.waitReady("files")
	s.kube.WaitGone(second)
	if st.Status.OutputsExport != nil {
		t.Errorf("status.outputsExport = %+v after the setting was dropped", st.Status.OutputsExport)
	}
}

func cmpIgnoreTime() cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".LastExportTime" }, cmp.Ignore())
}

// Outputs none of which is secret are recorded in the Update's status, and no Secret is
// written for them; a Program that drops its last output leaves the Stack with none (the
// Update records an empty set, which the API server keeps).
func TestStackReconciler_Reconcile_PlainOutputsInTheUpdatesStatus(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	prog := s.program("plain", map[string]pulumiv1.Resource{"f": fileResource("plain.txt", "x")}, map[string]string{"greeting": "hello"})
	s.create(prog)
	s.create(s.stack("plain", "plain"))
	st := s.waitReady("plain")
	s.g.Expect(string(st.Status.Outputs["greeting"].Raw)).To(Equal(`"hello"`))
	upd := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: st.Status.LastUpdate.Name}}
	s.g.Expect(s.kube.Get(upd)).To(Succeed())
	s.g.Expect(upd.Status.OutputsSecretName).To(BeEmpty())
	s.g.Expect(string(upd.Status.Outputs["greeting"].Raw)).To(Equal(`"hello"`))
	s.g.Expect(apierrors.IsNotFound(s.kube.Get(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: upd.Name + v1alpha1.OutputsSecretSuffix}}))).To(BeTrue(), "an outputs Secret was written")

	s.patch(prog, func() { prog.Program.Outputs = nil })
	s.eventually(func(g Gomega) {
		st = s.get(g, "plain")
		g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal("generation/2"))
	})
	st = s.waitReady("plain")
	s.g.Expect(st.Status.Outputs).To(BeEmpty())
	upd = &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: st.Status.LastUpdate.Name}}
	s.g.Expect(s.kube.Get(upd)).To(Succeed())
	s.g.Expect(upd.Status.Outputs).NotTo(BeNil(), "the Update does not say it recorded no outputs")
	s.g.Expect(upd.Status.Outputs).To(BeEmpty())
}
