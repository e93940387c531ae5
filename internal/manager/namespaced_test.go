package manager_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/manager"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

// The manager runs as a service account holding only what a namespace-scoped install
// grants (the generated rules as a Role in the watched namespace, leader election in its
// own, `get` on the watched Namespace), so a read or watch outside the watched namespaces
// would fail the test rather than go unnoticed.
func TestManager_WatchNamespaces_ReconcilesOnlyWatchedNamespaces(t *testing.T) {
	g := NewWithT(t)
	system, watched, other := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	cfg := grantNamespacedInstall(t, system, watched)

	// The grant is what the manager is limited to: the other namespace is out of reach.
	sa, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error {
		return sa.List(t.Context(), &pulumiv1.StackList{}, client.InNamespace(watched))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(apierrors.IsForbidden(sa.List(t.Context(), &pulumiv1.StackList{}, client.InNamespace(other)))).To(BeTrue())

	opts := testOptions(t)
	opts.LeaderElection, opts.LeaderElectionNamespace = true, system
	opts.WatchNamespaces = []string{watched}
	startManager(t, cfg, opts)

	created := map[string]*pulumiv1.Stack{}
	for _, ns := range []string{watched, other} {
		created[ns] = createHello(t, ns, "hello", nil)
	}

	g.Eventually(func(g Gomega) {
		st := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(created[watched]), st)).To(Succeed())
		ready := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionReady)
		g.Expect(ready).NotTo(BeNil(), "conditions: %v", st.Status.Conditions)
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Ready: %s", ready.Message)
		g.Expect(st.Finalizers).NotTo(BeEmpty())
	}).WithTimeout(3*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "the Stack in the watched namespace was not reconciled")

	// Not a single write: the object keeps the resourceVersion it was created with.
	g.Consistently(func(g Gomega) {
		st := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(created[other]), st)).To(Succeed())
		g.Expect(st.Finalizers).To(BeEmpty())
		g.Expect(st.Status.Conditions).To(BeEmpty())
		g.Expect(st.ResourceVersion).To(Equal(created[other].ResourceVersion))
	}).WithTimeout(5*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "the Stack outside the watched namespaces was touched")
}

// startManager runs a manager with opts until the test ends.
func startManager(t *testing.T, cfg *rest.Config, opts *manager.Options) ctrl.Manager {
	t.Helper()
	g := NewWithT(t)
	mgr, err := manager.New(cfg, opts)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	g.Expect(manager.Setup(ctx, mgr, opts)).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Logf("manager stopped: %v", err)
			}
		// Bounded: controller-runtime v0.25's Start never returns when cancelled before its
		// caches synced (kubernetes-sigs/controller-runtime#3440), which is exactly what a
		// missing permission causes; the test must fail, not hang.
		case <-time.After(90 * time.Second):
			t.Error("the manager did not stop within 90s of cancellation")
		}
	})
	return mgr
}

// grantNamespacedInstall creates the RBAC of a namespace-scoped install for the service
// account system/stackwright-manager, from the shipped rules, and returns a config that
// impersonates it.
func grantNamespacedInstall(t *testing.T, system, watched string) *rest.Config {
	t.Helper()
	g := NewWithT(t)
	const name = "stackwright-manager"
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: system}}

	var cluster rbacv1.ClusterRole
	readManifest(t, "config/rbac/role.yaml", &cluster)
	var rules []rbacv1.PolicyRule
	for _, r := range cluster.Rules {
		// Namespaces are cluster-scoped: a Role cannot grant them.
		r.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(res string) bool { return res == "namespaces" })
		if len(r.Resources) > 0 {
			rules = append(rules, r)
		}
	}
	var election rbacv1.Role
	readManifest(t, "config/rbac/leader_election_role.yaml", &election)

	objs := []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: watched}, Rules: rules},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: watched},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   subjects,
		},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: election.Name, Namespace: system}, Rules: election.Rules},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: election.Name, Namespace: system},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: election.Name},
			Subjects:   subjects,
		},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-namespaces"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{watched}, Verbs: []string{"get"}},
				{APIGroups: []string{"stackwright.dev"}, Resources: []string{"clusterpolicies"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"stackwright.dev"}, Resources: []string{"clusterpolicies/status"}, Verbs: []string{"get", "update", "patch"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-namespaces"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name + "-namespaces"},
			Subjects:   subjects,
		},
	}
	for _, o := range objs {
		g.Expect(env.Client.Create(t.Context(), o)).To(Succeed(), "%T %s", o, o.GetName())
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + system + ":" + name}
	return cfg
}

func readManifest(t *testing.T, rel string, into any) {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatalf("failed to read %s: %v", rel, err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("failed to parse %s: %v", rel, err)
	}
}
