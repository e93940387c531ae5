package v1_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// The manager-rights policy holds the manager's ServiceAccount, which RBAC lets create
// Secrets and Jobs, to the Opaque Secrets and labelled, unprivileged Jobs Stackwright writes;
// everyone else is untouched. The policy of config/rights runs here against a stand-in
// ServiceAccount of the test's namespace.
func TestManagerRightsPolicy_Create_OnlyWhatStackwrightWrites(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testContext(t)
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	policies, bindings, err := kubetest.ReadAdmission(filepath.Join(root, "config", "rights"))
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) != 1 || len(bindings) != 1 {
		t.Fatalf("config/rights ships %d policies and %d bindings; want one of each", len(policies), len(bindings))
	}
	manager := "system:serviceaccount:" + ns + ":manager"
	p, b := policies[0], bindings[0]
	if want := "request.userInfo.username == 'system:serviceaccount:stackwright-system:stackwright-manager'"; p.Spec.MatchConditions[0].Expression != want {
		t.Fatalf("the policy matches %q; want the shipped manager's ServiceAccount", p.Spec.MatchConditions[0].Expression)
	}
	p.Name, b.Name, b.Spec.PolicyName = "rights-"+ns, "rights-"+ns, "rights-"+ns
	p.Spec.MatchConditions[0].Expression = fmt.Sprintf("request.userInfo.username == '%s'", manager)
	// The manager's RBAC, as far as this test needs it.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manager"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create"}},
		},
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manager"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "manager"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "manager", Namespace: ns}},
	}
	for _, o := range []client.Object{p, b, role, rb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("failed to create %T: %v", o, err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, o) })
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: manager, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	as, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	secret := func(name string, typ corev1.SecretType) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: typ}
	}
	job := func(name string, labels map[string]string, hostNetwork bool) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, HostNetwork: hostNetwork,
				Containers: []corev1.Container{{Name: "runner", Image: "runner:1"}},
			}}},
		}
	}
	runner := map[string]string{"app.kubernetes.io/managed-by": "stackwright"}
	// The policy takes effect a moment after it is created.
	NewWithT(t).Eventually(func() error {
		return as.Create(ctx, secret(fmt.Sprintf("probe-%d", time.Now().UnixNano()), corev1.SecretTypeServiceAccountToken))
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(MatchError(ContainSubstring("writes only Opaque Secrets")))
	for _, tc := range []struct {
		name   string
		obj    client.Object
		refuse string
	}{
		{"an Opaque Secret", secret("work", corev1.SecretTypeOpaque), ""},
		{"a ServiceAccount token Secret", secret("token", corev1.SecretTypeServiceAccountToken), "writes only Opaque Secrets"},
		{"a registry credential", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}, "writes only Opaque Secrets"},
		{"a runner Job", job("runner", runner, false), ""},
		{"a Job without the runner label", job("other", nil, false), "creates only its runner Jobs"},
		{"a runner Job on the node's network", job("host", runner, true), "never use the node's namespaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := as.Create(ctx, tc.obj)
			switch {
			case tc.refuse == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)):
				t.Errorf("Create = %v; want refused saying %q", err, tc.refuse)
			}
		})
	}
	// Anyone else is untouched.
	if err := env.Client.Create(ctx, secret("admin-token", corev1.SecretTypeServiceAccountToken)); err != nil {
		t.Errorf("the policy refused another user: %v", err)
	}
}
