package manager_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// A template whose stack needs approval names its approvers: the API server refuses the
// approve annotation on an instance from anyone outside that group (the policy of
// config/templates, checking the request's user), and the approver's annotation reaches
// the instance's Stack, which then applies exactly the previewed change.
func TestManager_StackTemplate_OnlyTheTemplatesApproversApprove(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	id := rand.Uint32()
	group := fmt.Sprintf("t%d.test.stackwright.dev", id)
	policy := fmt.Sprintf("template-approvals-%d", id)
	approvers := fmt.Sprintf("db-approvers-%d", id)
	installApprovalPolicy(t, policy, group)
	opts := testOptions(t)
	opts.TemplateAPIGroups, opts.TemplateApprovalPolicy = []string{group}, policy
	startManager(t, env.Config, opts)

	platform, tenant := env.Namespace(t), env.Namespace(t)
	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "bucket", Namespace: platform}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"greeting": {Raw: []byte(`"approved"`)}}
	g.Expect(env.Client.Create(ctx, prog)).To(Succeed())
	tmpl := &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("approved-%d", id)},
		Spec: v1alpha1.StackTemplateSpec{
			API:       v1alpha1.TemplateAPI{Group: group, Kind: "Bucket", Plural: "buckets"},
			Namespace: platform,
			Stack:     apiextensionsv1.JSON{Raw: []byte(`{"stack":"b","programRef":{"name":"bucket"},"stackwright":{"approval":"Manual"}}`)},
			Outputs:   []string{"greeting"},
			Approvers: &v1alpha1.TemplateApprovers{Groups: []string{approvers}},
		},
	}
	createTemplate(t, tmpl)

	// Both users may edit buckets; only alice is an approver.
	mallory := userClient(t, "mallory", []string{"tenants"}, group)
	alice := userClient(t, "alice", []string{approvers}, group)
	bucket := func(name string, annotations map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(group + "/v1alpha1")
		u.SetKind("Bucket")
		u.SetNamespace(tenant)
		u.SetName(name)
		u.SetAnnotations(annotations)
		return u
	}
	g.Eventually(func(g Gomega) {
		err := mallory.Create(ctx, bucket("probe", map[string]string{pulumiv1.ApproveAnnotation: "anything"}))
		if err == nil {
			_ = env.Client.Delete(ctx, bucket("probe", nil))
		}
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "mallory's create with an approval: %v", err)
		g.Expect(err.Error()).To(ContainSubstring("only members of " + approvers))
	}).WithTimeout(time.Minute).Should(Succeed(), "the approval policy comes into force")

	inst := bucket("data", nil)
	g.Expect(mallory.Create(ctx, inst)).To(Succeed(), "a tenant without approval rights still creates instances")
	var preview string
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
		state, _, _ := unstructured.NestedString(inst.Object, "status", "approval", "state")
		g.Expect(state).To(Equal(string(pulumiv1.ApprovalAwaiting)), "status: %v", inst.Object["status"])
		preview, _, _ = unstructured.NestedString(inst.Object, "status", "approval", "preview")
		g.Expect(conditionReason(inst, pulumiv1.ConditionReconciling)).To(Equal(pulumiv1.ReasonAwaitingApproval))
		g.Expect(conditionField(inst, pulumiv1.ConditionReconciling, "message")).To(ContainSubstring("by a member of " + approvers + ": kubectl annotate buckets." + group))
	}).WithTimeout(2*time.Minute).Should(Succeed(), "the instance shows the change awaiting approval and who approves it")

	err := annotate(ctx, mallory, inst, pulumiv1.ApproveAnnotation, preview)
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "mallory's approval: %v", err)
	g.Expect(annotate(ctx, mallory, inst, "unrelated", "yes")).To(Succeed(), "other annotations stay free")

	g.Expect(annotate(ctx, alice, inst, pulumiv1.ApproveAnnotation, preview)).To(Succeed())
	waitInstance(t, inst, pulumiv1.ConditionReady, "the approved change is applied")
	g.Expect(annotate(ctx, mallory, inst, "unrelated", "again")).To(Succeed(), "an instance that carries an approval stays editable by its tenant")
	var stacks pulumiv1.StackList
	g.Expect(env.Client.List(ctx, &stacks, client.InNamespace(platform), client.MatchingLabels{v1alpha1.TemplateLabel: tmpl.Name})).To(Succeed())
	g.Expect(stacks.Items).To(HaveLen(1))
	g.Expect(stacks.Items[0].Annotations).To(HaveKeyWithValue(pulumiv1.ApproveAnnotation, preview))
	g.Expect(env.Client.Delete(ctx, inst)).To(Succeed())
}

// installApprovalPolicy installs config/templates' policy and binding as name, narrowed to
// group as the chart narrows them to the install's template groups, for the test's life.
func installApprovalPolicy(t *testing.T, name, group string) {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	policies, bindings, err := kubetest.ReadAdmission(filepath.Join(root, "config", "templates"))
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) != 1 || len(bindings) != 1 {
		t.Fatalf("config/templates ships %d policies and %d bindings, want one of each", len(policies), len(bindings))
	}
	p, b := policies[0], bindings[0]
	p.Name, b.Name, b.Spec.PolicyName = name, name, name
	for i := range p.Spec.MatchConstraints.ResourceRules {
		p.Spec.MatchConstraints.ResourceRules[i].APIGroups = []string{group}
	}
	for _, o := range []client.Object{p, b} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatalf("failed to create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}

// userClient is a client acting as user, in groups, with the right to create, read and
// edit every resource of the API group apiGroup.
func userClient(t *testing.T, user string, groups []string, apiGroup string) client.Client {
	t.Helper()
	name := fmt.Sprintf("%s-%s", user, strings.Split(apiGroup, ".")[0])
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{apiGroup}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatalf("failed to create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// annotate sets one annotation of u with a merge patch, as kubectl annotate does.
func annotate(ctx context.Context, c client.Client, u *unstructured.Unstructured, key, value string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value)
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(u.GroupVersionKind())
	obj.SetNamespace(u.GetNamespace())
	obj.SetName(u.GetName())
	return c.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", patch))
}
