package instance_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/instance"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// A tenant's instance becomes a Stack in the platform namespace, rendered from its
// parameters (the schema's defaults applied, a secret parameter kept in a Secret beside the
// Stack and never in its spec); the instance is Ready once its Stack is Ready at the spec
// rendered from the instance's generation, and receives the outputs the template
// publishes, in its own namespace. A parameter change re-renders the Stack; deleting the
// instance deletes its Stack and waits for it to go.
func TestController_Instance_BecomesAStackInThePlatformNamespace(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	ctx := t.Context()
	g := s.g
	s.label(map[string]string{"team": "a"})
	tmpl := s.template(group, "Bucket", `{"stack":"buckets","programRef":{"name":"bucket"},"destroyOnFinalize":true}`)
	tmpl.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"size":{"type":"integer","minimum":1,"maximum":10,"default":3},"owner":{"type":"string"}}}`)}
	tmpl.Spec.Config = []v1alpha1.TemplateConfig{{Key: "size", Parameter: "size"}, {Key: "owner", Parameter: "owner", Secret: true}}
	tmpl.Spec.Outputs = []string{"greeting", "who"}
	tmpl.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	s.serve(tmpl)

	inst := s.instance(tmpl, "data", `{"parameters":{"owner":"alice"},"writeConnectionSecretToRef":{"name":"bucket-conn"},"writeOutputsToConfigMapRef":{"name":"bucket-info"}}`)
	g.Expect(env.Client.Create(ctx, inst, client.FieldValidation("Strict"))).To(Succeed())
	st := s.waitStack(inst, "the instance becomes a Stack", func(g Gomega, st *pulumiv1.Stack) {
		g.Expect(st.Spec.Config).To(HaveKey("size"))
	})
	g.Expect(st.Spec.Stack).To(Equal("buckets." + s.Namespace + ".data"))
	g.Expect(st.Labels).To(HaveKeyWithValue(v1alpha1.TemplateLabel, tmpl.Name))
	g.Expect(st.Labels).To(HaveKeyWithValue(v1alpha1.InstanceNamespaceLabel, s.Namespace))
	g.Expect(st.Labels).To(HaveKeyWithValue(v1alpha1.TemplateRevisionLabel, strconv.FormatInt(tmpl.Status.Revision, 10)))
	g.Expect(st.Spec.DestroyOnFinalize).To(BeTrue())
	g.Expect(string(st.Spec.Config["size"].Raw)).To(Equal("3"), "the schema's default is rendered")
	spec, err := json.Marshal(st.Spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(spec)).NotTo(ContainSubstring("alice"), "a secret parameter never appears in the Stack's spec")
	ref := st.Spec.SecretsRef["owner"].Secret
	g.Expect(ref).NotTo(BeNil())
	params := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.platform, Name: ref.Name}, params)).To(Succeed())
	g.Expect(string(params.Data[ref.Key])).To(Equal("alice"), "the secret parameter is kept beside the Stack")
	got := s.waitInstance(inst, pulumiv1.ConditionReconciling, "", "the instance waits for its Stack")
	rev, _, _ := unstructured.NestedInt64(got.Object, "status", "templateRevision")
	g.Expect(rev).To(Equal(tmpl.Status.Revision))

	// The Stack controller's finalizer, which holds the Stack while it destroys.
	const destroying = "test.stackwright.dev/destroying"
	s.Patch(st, func() { st.Finalizers = append(st.Finalizers, destroying) })
	s.exportOutputs(st, map[string]string{"greeting": "size 3", "who": "alice", "internal": "platform only"},
		map[string]string{"greeting": "size 3", "internal": "platform only"})
	s.stackReady(st)
	got = s.waitInstance(inst, pulumiv1.ConditionReady, pulumiv1.ReasonProcessingCompleted, "the instance is Ready with its Stack")
	outputs, _, _ := unstructured.NestedMap(got.Object, "status", "outputs")
	g.Expect(outputs).To(Equal(map[string]any{"greeting": "size 3"}), "status: the non-secret published outputs only")
	conn := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: "bucket-conn"}, conn)).To(Succeed())
	g.Expect(conn.Data).To(Equal(map[string][]byte{"greeting": []byte("size 3"), "who": []byte("alice")}))
	g.Expect(metav1.IsControlledBy(conn, got)).To(BeTrue())
	info := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: "bucket-info"}, info)).To(Succeed())
	g.Expect(info.Data).To(Equal(map[string]string{"greeting": "size 3"}))

	g.Expect(unstructured.SetNestedField(got.Object, int64(5), "spec", "parameters", "size")).To(Succeed())
	g.Expect(env.Client.Update(ctx, got)).To(Succeed())
	st = s.waitStack(inst, "a parameter change reaches the Stack", func(g Gomega, st *pulumiv1.Stack) {
		g.Expect(string(st.Spec.Config["size"].Raw)).To(Equal("5"))
	})
	s.waitInstance(inst, pulumiv1.ConditionReconciling, pulumiv1.ReasonNotReadyInProgress, "the instance is not Ready until its Stack is, for the new spec")
	s.exportOutputs(st, map[string]string{"greeting": "size 5", "who": "alice"}, map[string]string{"greeting": "size 5"})
	s.stackReady(st)
	s.waitInstance(inst, pulumiv1.ConditionReady, "", "the instance is Ready at its new generation")
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: "bucket-info"}, info)).To(Succeed())
	g.Expect(info.Data).To(HaveKeyWithValue("greeting", "size 5"), "the new outputs are published")

	g.Expect(env.Client.Delete(ctx, inst)).To(Succeed())
	got = s.waitInstance(inst, pulumiv1.ConditionReconciling, v1alpha1.ReasonDestroying, "the deleted instance waits for its Stack")
	g.Expect(condition(got, pulumiv1.ConditionReconciling)["message"]).To(ContainSubstring("waiting for Stack " + s.platform + "/" + st.Name + " to be deleted"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(st), st)).To(Succeed())
	g.Expect(st.DeletionTimestamp.IsZero()).To(BeFalse(), "the Stack is being deleted")
	s.Patch(st, func() { st.Finalizers = nil })
	s.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst.DeepCopy())
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the instance is gone: %v", err)
		err = env.Client.Get(ctx, client.ObjectKeyFromObject(params), &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the parameter Secret is gone: %v", err)
	})
}

// An instance in a namespace the template's namespaceSelector does not select is Stalled,
// and no Stack is made for it.
func TestController_Instance_OutsideTheNamespaceSelectorIsStalled(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	tmpl := s.template(group, "Cache", `{"stack":"caches","programRef":{"name":"cache"}}`)
	tmpl.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	s.serve(tmpl)
	inst := s.instance(tmpl, "data", `{}`)
	s.g.Expect(env.Client.Create(t.Context(), inst)).To(Succeed())
	got := s.waitInstance(inst, pulumiv1.ConditionStalled, v1alpha1.ReasonNamespaceNotAllowed, "a namespace outside the selector is refused")
	s.g.Expect(condition(got, pulumiv1.ConditionStalled)["message"]).To(ContainSubstring("does not serve namespace " + s.Namespace))
	var stacks pulumiv1.StackList
	s.g.Expect(env.Client.List(t.Context(), &stacks, client.InNamespace(s.platform))).To(Succeed())
	s.g.Expect(stacks.Items).To(BeEmpty())
	s.g.Expect(env.Client.Delete(t.Context(), inst)).To(Succeed())
	s.Eventually(func(g Gomega) {
		err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(inst), inst.DeepCopy())
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "an instance that made nothing goes at once: %v", err)
	})
}

// The platform team's policies select the instances' Stacks by the template label, like
// any Stack's. An instance whose Stack a policy stops is Stalled with the policy's verdict,
// which is written for the tenant (the platform's other messages are not repeated), and is
// Ready once its parameters are within the policy.
func TestController_Instance_ShowsThePolicyVerdictsOfItsStack(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.g
	tmpl := s.template(group, "Token", `{"stack":"t","programRef":{"name":"token"}}`)
	tmpl.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"length":{"type":"integer","default":4}}}`)}
	tmpl.Spec.Config = []v1alpha1.TemplateConfig{{Key: "length", Parameter: "length"}}
	s.serve(tmpl)
	policySelects, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.TemplateLabel: tmpl.Name}})
	g.Expect(err).NotTo(HaveOccurred())

	inst := s.instance(tmpl, "long", `{"parameters":{"length":8}}`)
	g.Expect(env.Client.Create(t.Context(), inst)).To(Succeed())
	st := s.waitStack(inst, "the instance becomes a Stack", func(g Gomega, st *pulumiv1.Stack) {})
	g.Expect(policySelects.Matches(labels.Set(st.Labels))).To(BeTrue(), "a ClusterPolicy's stackSelector on the template label selects the Stack")
	g.Expect(string(st.Spec.Config["length"].Raw)).To(Equal("8"))

	const platformText = "failed to read Secret " + "platform/cloud-admin-keys"
	s.stackStalled(st, pulumiv1.ReasonSpecInvalid, platformText)
	got := s.waitInstance(inst, pulumiv1.ConditionStalled, pulumiv1.ReasonSpecInvalid, "the instance shows its Stack's reason")
	g.Expect(condition(got, pulumiv1.ConditionStalled)["message"]).NotTo(ContainSubstring(platformText), "the platform's message is not the tenant's")

	const verdict = "urn:pulumi:t::token::Random::token: length 8 is over the platform's limit of 5"
	s.stackStalled(st, pulumiv1.ReasonPolicyViolation, verdict)
	got = s.waitInstance(inst, pulumiv1.ConditionStalled, pulumiv1.ReasonPolicyViolation, "the policy stops the instance's change")
	g.Expect(condition(got, pulumiv1.ConditionStalled)["message"]).To(Equal(verdict))

	g.Expect(unstructured.SetNestedField(got.Object, int64(5), "spec", "parameters", "length")).To(Succeed())
	g.Expect(env.Client.Update(t.Context(), got)).To(Succeed())
	st = s.waitStack(inst, "the new length reaches the Stack", func(g Gomega, st *pulumiv1.Stack) {
		g.Expect(string(st.Spec.Config["length"].Raw)).To(Equal("5"))
	})
	s.stackReady(st)
	s.waitInstance(inst, pulumiv1.ConditionReady, "", "within the policy, the change applies")
}

// Under the Hold strategy a template change is a new revision that existing instances do
// not take: an instance's parameter change is rendered from its own revision, until the
// platform team opens the new one on its Stack (an annotation it cannot read is announced,
// not followed). Then the old revision, used by no one, is deleted.
func TestController_Instance_HoldKeepsItsRevisionUntilOpened(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.g
	ctx := t.Context()
	tmpl := s.template(group, "Queue", `{"stack":"q","programRef":{"name":"held"},"config":{"flavour":"one"}}`)
	tmpl.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"size":{"type":"integer","default":3}}}`)}
	tmpl.Spec.Config = []v1alpha1.TemplateConfig{{Key: "size", Parameter: "size"}}
	tmpl.Spec.UpdateStrategy = v1alpha1.TemplateUpdateStrategy{Type: v1alpha1.UpdateStrategyHold}
	s.serve(tmpl)
	first := tmpl.Status.Revision
	rendered := func(flavour, size string, rev int64) func(Gomega, *pulumiv1.Stack) {
		return func(g Gomega, st *pulumiv1.Stack) {
			g.Expect(string(st.Spec.Config["flavour"].Raw)).To(Equal(strconv.Quote(flavour)))
			g.Expect(string(st.Spec.Config["size"].Raw)).To(Equal(size))
			g.Expect(st.Labels).To(HaveKeyWithValue(v1alpha1.TemplateRevisionLabel, strconv.FormatInt(rev, 10)))
		}
	}

	inst := s.instance(tmpl, "jobs", `{}`)
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
	s.waitStack(inst, "the instance runs the first revision", rendered("one", "3", first))

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
	before := tmpl.DeepCopy()
	tmpl.Spec.Stack = apiextensionsv1.JSON{Raw: []byte(`{"stack":"q","programRef":{"name":"held"},"config":{"flavour":"two"}}`)}
	// A merge patch of the change alone: the controller's status writes would make an
	// update of the whole object conflict.
	g.Expect(env.Client.Patch(ctx, tmpl, client.MergeFrom(before))).To(Succeed())
	s.waitTemplate(tmpl, "the new revision is served and the instance is behind", func(g Gomega) {
		g.Expect(tmpl.Status.Revision).To(BeNumerically(">", first))
		g.Expect(tmpl.Status.InstancesBehind).To(BeEquivalentTo(1))
	})
	second := tmpl.Status.Revision

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
	g.Expect(unstructured.SetNestedField(inst.Object, int64(4), "spec", "parameters", "size")).To(Succeed())
	g.Expect(env.Client.Update(ctx, inst)).To(Succeed())
	st := s.waitStack(inst, "a held instance's parameter change is rendered from its own revision", rendered("one", "4", first))

	s.Patch(st, func() { st.Annotations[v1alpha1.OpenTemplateRevisionAnnotation] = "soon" })
	s.waitEvent(s.platform, st.Name, instance.EventRevisionNotOpened)
	s.Patch(st, func() { st.Annotations[v1alpha1.OpenTemplateRevisionAnnotation] = "latest" })
	st = s.waitStack(inst, "the opened instance moves to the latest revision", rendered("two", "4", second))
	s.stackReady(st)
	got := s.waitInstance(inst, pulumiv1.ConditionReady, "", "the instance is Ready at the new revision")
	rev, _, _ := unstructured.NestedInt64(got.Object, "status", "templateRevision")
	g.Expect(rev).To(Equal(second))
	s.waitTemplate(tmpl, "no instance is behind, and the unused revision is gone", func(g Gomega) {
		g.Expect(tmpl.Status.InstancesBehind).To(BeZero())
		err := env.Client.Get(ctx, client.ObjectKey{Name: v1alpha1.RevisionName(tmpl.Name, first)}, &v1alpha1.StackTemplateRevision{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "revision %d: %v", first, err)
	})
}

// Every event about an instance is emitted after the status that it announces was
// written: the recorder reads the instance from the API server as each event comes, and
// finds the Stack's creation and its operations already in the status. And the same
// operation seen again is not announced again.
func TestController_Events_FollowTheStatusTheyAnnounce(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	tmpl := s.template(group, "Topic", `{"stack":"topics","programRef":{"name":"topic"}}`)
	// The Stack's messages are the instance's: a Stack status write shows in the instance.
	tmpl.Spec.InstanceMessages = v1alpha1.InstanceMessagesFull
	s.serve(tmpl)
	inst := s.instance(tmpl, "orders", `{}`)
	s.g.Expect(env.Client.Create(t.Context(), inst)).To(Succeed())
	st := s.waitStack(inst, "the instance becomes a Stack", func(Gomega, *pulumiv1.Stack) {})
	s.WaitEvent(inst, corev1.EventTypeNormal, instance.EventStackCreated)

	s.stackStalled(st, pulumiv1.ReasonUpdateFailed, "up failed")
	s.waitInstance(inst, pulumiv1.ConditionStalled, pulumiv1.ReasonUpdateFailed, "the instance shows the failure")
	s.WaitEvent(inst, corev1.EventTypeWarning, instance.EventUpdateFailed)
	s.stackReady(st)
	s.waitInstance(inst, pulumiv1.ConditionReady, "", "the instance shows the success")
	s.WaitEvent(inst, corev1.EventTypeNormal, instance.EventUpdateSucceeded)
	// A Stack status write that changes nothing of its last operation.
	s.setStackStatus(st, func(st *pulumiv1.Stack) { st.Status.Conditions[0].Message = "still up to date" })
	s.Eventually(func(g Gomega) {
		got := inst.DeepCopy()
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(inst), got)).To(Succeed())
		g.Expect(condition(got, pulumiv1.ConditionReady)).To(And(HaveKeyWithValue("status", "True"), HaveKeyWithValue("message", "still up to date")))
	})

	s.g.Expect(recorder.Unwritten(s.Namespace)).To(BeEmpty(), "events that came before their status")
	s.g.Expect(recorder.Count(s.Namespace, inst.GetName(), instance.EventUpdateSucceeded)).To(Equal(1), "the same operation is announced once")
}

// A template whose Stacks need approval names its approvers: the API server refuses the
// approve annotation on an instance from anyone outside that group (the policy of
// config/templates, checking the request's user), while the instance shows the change
// awaiting approval and who approves it how; the approver's annotation reaches the
// instance's Stack.
func TestController_Instance_OnlyTheTemplatesApproversApprove(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.g
	ctx := t.Context()
	approvers := "db-approvers"
	installApprovalPolicy(t, approvalPolicy, approvalGroup)
	tmpl := s.template(approvalGroup, "Ledger", `{"stack":"l","programRef":{"name":"ledger"},"stackwright":{"approval":"Manual"}}`)
	tmpl.Spec.Approvers = &v1alpha1.TemplateApprovers{Groups: []string{approvers}}
	s.serve(tmpl)

	// Both users may edit ledgers; only alice is an approver.
	mallory := userClient(t, "mallory", []string{"tenants"}, approvalGroup)
	alice := userClient(t, "alice", []string{approvers}, approvalGroup)
	g.Eventually(func(g Gomega) {
		probe := s.instance(tmpl, "probe", `{}`)
		probe.SetAnnotations(map[string]string{pulumiv1.ApproveAnnotation: "anything"})
		err := mallory.Create(ctx, probe)
		if err == nil {
			_ = env.Client.Delete(ctx, probe)
		}
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "mallory's create with an approval: %v", err)
		g.Expect(err.Error()).To(ContainSubstring("only members of " + approvers))
	}).WithTimeout(waitTimeout).WithPolling(waitPolling).Should(Succeed(), "the approval policy comes into force")

	inst := s.instance(tmpl, "main", `{}`)
	g.Expect(mallory.Create(ctx, inst)).To(Succeed(), "a tenant without approval rights still creates instances")
	st := s.waitStack(inst, "the instance becomes a Stack", func(Gomega, *pulumiv1.Stack) {})
	const preview = "main-preview-1"
	s.setStackStatus(st, func(st *pulumiv1.Stack) {
		st.Status.ObservedGeneration = st.Generation
		st.Status.Conditions = []metav1.Condition{{Type: pulumiv1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: pulumiv1.ReasonAwaitingApproval,
			Message: "awaiting approval", ObservedGeneration: st.Generation, LastTransitionTime: metav1.Now()}}
		st.Status.Stackwright = &pulumiv1.StackwrightStatus{Approval: &pulumiv1.ApprovalStatus{
			Preview: preview, State: pulumiv1.ApprovalAwaiting, DesiredStateKey: "k", Attempt: 1, Summary: "1 to create",
		}}
	})
	got := s.waitInstance(inst, pulumiv1.ConditionReconciling, pulumiv1.ReasonAwaitingApproval, "the instance shows the change awaiting approval")
	state, _, _ := unstructured.NestedString(got.Object, "status", "approval", "state")
	g.Expect(state).To(Equal(string(pulumiv1.ApprovalAwaiting)))
	shown, _, _ := unstructured.NestedString(got.Object, "status", "approval", "preview")
	g.Expect(shown).To(Equal(preview))
	g.Expect(condition(got, pulumiv1.ConditionReconciling)["message"]).To(ContainSubstring("by a member of " + approvers + ": kubectl annotate ledgers." + approvalGroup))

	err := annotate(ctx, mallory, inst, pulumiv1.ApproveAnnotation, preview)
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "mallory's approval: %v", err)
	g.Expect(annotate(ctx, mallory, inst, "unrelated", "yes")).To(Succeed(), "other annotations stay free")
	g.Expect(annotate(ctx, alice, inst, pulumiv1.ApproveAnnotation, preview)).To(Succeed())
	st = s.waitStack(inst, "the approval reaches the Stack", func(g Gomega, st *pulumiv1.Stack) {
		g.Expect(st.Annotations).To(HaveKeyWithValue(pulumiv1.ApproveAnnotation, preview))
	})
	s.setStackStatus(st, func(st *pulumiv1.Stack) { st.Status.Stackwright.Approval.State = pulumiv1.ApprovalApproved })
	s.stackReady(st)
	s.waitInstance(inst, pulumiv1.ConditionReady, "", "the approved change is applied")
	g.Expect(annotate(ctx, mallory, inst, "unrelated", "again")).To(Succeed(), "an instance that carries an approval stays editable by its tenant")
}

// An approval on an instance of a template that names no approvers is not forwarded to
// its Stack, and is announced as ignored.
func TestController_Instance_ApprovalWithoutApproversIsIgnored(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	tmpl := s.template(group, "Vault", `{"stack":"v","programRef":{"name":"vault"},"stackwright":{"approval":"Manual"}}`)
	s.serve(tmpl)
	inst := s.instance(tmpl, "keys", `{}`)
	inst.SetAnnotations(map[string]string{pulumiv1.ApproveAnnotation: "keys-preview-1"})
	s.g.Expect(env.Client.Create(t.Context(), inst)).To(Succeed())
	s.WaitEvent(inst, corev1.EventTypeWarning, instance.EventApprovalIgnored)
	st := s.waitStack(inst, "the instance becomes a Stack", func(Gomega, *pulumiv1.Stack) {})
	s.g.Expect(st.Annotations).NotTo(HaveKey(pulumiv1.ApproveAnnotation), "the approval is not forwarded")
}

// The platform team protects what an instance stands for by annotating its Stack: the
// instance's deletion then waits, Stalled with the reason, until the annotation goes.
func TestController_Instance_DeletionWaitsForItsProtectedStack(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	ctx := t.Context()
	g := s.g
	kubetest.InstallProtection(ctx, t, env.Client, s.platform)
	tmpl := s.template(group, "Locker", `{"stack":"lockers","programRef":{"name":"locker"}}`)
	s.serve(tmpl)
	inst := s.instance(tmpl, "keep", `{}`)
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
	st := s.waitStack(inst, "the instance becomes a Stack", func(Gomega, *pulumiv1.Stack) {})
	stack := &unstructured.Unstructured{}
	stack.SetGroupVersionKind(pulumiv1.GroupVersion.WithKind("Stack"))
	stack.SetNamespace(st.Namespace)
	stack.SetName(st.Name)
	g.Expect(annotate(ctx, env.Client, stack, pulumiv1.ProtectedAnnotation, "true")).To(Succeed())

	g.Expect(env.Client.Delete(ctx, inst)).To(Succeed())
	held := s.waitInstance(inst, pulumiv1.ConditionStalled, pulumiv1.ReasonDeletionProtected, "the protected Stack holds the instance")
	g.Expect(condition(held, pulumiv1.ConditionStalled)["message"]).To(ContainSubstring("is protected from deletion (stackwright.dev/protected=true)"))

	g.Expect(annotate(ctx, env.Client, stack, pulumiv1.ProtectedAnnotation, "false")).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst.DeepCopy()))
	}).WithTimeout(waitTimeout).Should(BeTrue(), "the instance goes once its Stack may")
}

// A template that protects its instances has their deletion refused at admission, naming
// the template, until a person annotates the instance stackwright.dev/protected=false; its
// Stack is then destroyed as any other's. Instances of other templates are not held.
func TestController_Instance_TemplateProtectsItsInstances(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	ctx := t.Context()
	g := s.g
	installTemplatePolicy(t, "stackwright-template-protection", "template-protection-"+s.platform, approvalGroup)
	tmpl := s.template(approvalGroup, "Strongbox", `{"stack":"strongboxes","programRef":{"name":"strongbox"}}`)
	tmpl.Spec.ProtectInstances = true
	s.serve(tmpl)
	g.Eventually(func(g Gomega) {
		probe := s.instance(tmpl, fmt.Sprintf("probe-%d", time.Now().UnixNano()), `{}`)
		g.Expect(env.Client.Create(ctx, probe)).To(Succeed())
		err := env.Client.Delete(ctx, probe)
		if err != nil {
			_ = annotate(ctx, env.Client, probe, pulumiv1.ProtectedAnnotation, "false")
			_ = env.Client.Delete(ctx, probe)
		}
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "deleting a probe: %v", err)
	}).WithTimeout(waitTimeout).WithPolling(waitPolling).Should(Succeed(), "the template protection policy comes into force")

	inst := s.instance(tmpl, "vault", `{}`)
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
	s.waitStack(inst, "the instance becomes a Stack", func(Gomega, *pulumiv1.Stack) {})
	err := env.Client.Delete(ctx, inst)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "deleting a protected instance: %v", err)
	g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("Strongbox %s/vault is protected from deletion by StackTemplate %s (spec.protectInstances): annotate it stackwright.dev/protected=false first", inst.GetNamespace(), tmpl.Name)))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
	g.Expect(inst.GetDeletionTimestamp()).To(BeNil(), "the refused deletion started")

	g.Expect(annotate(ctx, env.Client, inst, pulumiv1.ProtectedAnnotation, "false")).To(Succeed())
	g.Expect(env.Client.Delete(ctx, inst)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst.DeepCopy()))
	}).WithTimeout(waitTimeout).Should(BeTrue(), "the released instance goes")

	other := s.template(approvalGroup, "Shoebox", `{"stack":"shoeboxes","programRef":{"name":"shoebox"}}`)
	s.serve(other)
	free := s.instance(other, "free", `{}`)
	g.Expect(env.Client.Create(ctx, free)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, free)).To(Succeed(), "an instance of a template that protects nothing")
}

// A template's status fields are typed in its kind's definition, with their printer
// columns, and filled from the non-secret outputs of each instance's Stack: an instance
// whose Stack is Ready waits for the fields readyWhen names, a secret output fills none
// (its value, a canary, appears nowhere in the instance) and is announced, and a change
// of a field's type is no breaking change: it applies to every instance at once.
func TestController_Instance_TypedStatusFieldsFromItsOutputs(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.g
	ctx := t.Context()
	const canary = "canary-5d1e9b"
	tmpl := s.template(group, "Endpoint", `{"stack":"endpoints","programRef":{"name":"endpoint"}}`)
	tmpl.Spec.Outputs = []string{"url", "port", "password"}
	tmpl.Spec.StatusFields = []v1alpha1.TemplateStatusField{
		{Name: "endpoint", Type: v1alpha1.StatusFieldString, Description: "Where to connect.", Output: "url", PrinterColumn: v1alpha1.PrinterColumnStandard},
		{Name: "port", Type: v1alpha1.StatusFieldInteger, Output: "port", PrinterColumn: v1alpha1.PrinterColumnWide},
		{Name: "password", Type: v1alpha1.StatusFieldString, Output: "password"},
	}
	tmpl.Spec.ReadyWhen = []string{"endpoint", "port"}
	undeclared := tmpl.DeepCopy()
	undeclared.Name, undeclared.Spec.ReadyWhen = "undeclared-"+tmpl.Name, []string{"endpoint", "host"}
	err := env.Client.Create(ctx, undeclared)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "readyWhen naming an undeclared field: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.readyWhen names a field spec.statusFields does not declare"))
	s.serve(tmpl)

	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: tmpl.DefinitionName()}, crd)).To(Succeed())
	columns := map[string]int32{}
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		columns[c.Name+" "+c.JSONPath] = c.Priority
	}
	g.Expect(columns).To(HaveKeyWithValue("Endpoint .status.fields.endpoint", int32(0)))
	g.Expect(columns).To(HaveKeyWithValue("Port .status.fields.port", int32(1)), "a Wide column shows with -o wide only")
	port := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["fields"].Properties["port"]
	g.Expect(port.Type).To(Equal("integer"))

	inst := s.instance(tmpl, "api", `{}`)
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
	st := s.waitStack(inst, "the instance becomes a Stack", func(Gomega, *pulumiv1.Stack) {})
	s.stackReady(st)
	got := s.waitInstance(inst, pulumiv1.ConditionReconciling, v1alpha1.ReasonAwaitingStatusFields, "a Ready Stack without outputs leaves the instance waiting for its fields")
	g.Expect(condition(got, pulumiv1.ConditionReconciling)["message"]).To(Equal(
		"the stack is ready; waiting for the status fields endpoint (output url is not published yet), port (output port is not published yet)"))

	// The Stack controller exports every output as text: port arrives as "5432".
	s.exportOutputs(st, map[string]string{"url": "https://api.example.com", "port": "5432", "password": canary},
		map[string]string{"url": "https://api.example.com", "port": "5432"})
	got = s.waitInstance(inst, pulumiv1.ConditionReady, pulumiv1.ReasonProcessingCompleted, "the instance is Ready once its fields are set")
	fields, _, _ := unstructured.NestedMap(got.Object, "status", "fields")
	g.Expect(fields).To(Equal(map[string]any{"endpoint": "https://api.example.com", "port": int64(5432)}))
	whole, err := json.Marshal(got.Object)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(whole)).NotTo(ContainSubstring(canary), "a secret output reaches no status field")
	s.WaitEvent(inst, corev1.EventTypeWarning, instance.EventStatusFieldUnset)

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
	first := tmpl.Status.Revision
	tmpl.Spec.StatusFields[1].Type = v1alpha1.StatusFieldBoolean
	g.Expect(env.Client.Update(ctx, tmpl)).To(Succeed())
	s.waitTemplate(tmpl, "a field's new type is served, not refused as a breaking change", func(g Gomega) {
		g.Expect(tmpl.Status.Revision).To(BeNumerically(">", first))
	})
	got = s.waitInstance(inst, pulumiv1.ConditionReconciling, v1alpha1.ReasonAwaitingStatusFields, "an output of another type leaves the field unset")
	g.Expect(condition(got, pulumiv1.ConditionReconciling)["message"]).To(HaveSuffix("port (port is a string that is not true or false)"))
	fields, _, _ = unstructured.NestedMap(got.Object, "status", "fields")
	g.Expect(fields).To(Equal(map[string]any{"endpoint": "https://api.example.com"}))
}
