package instance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/instance"
	"github.com/stackwright/stackwright/internal/controller/stacktemplate"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// One real manager runs the instance controller, with the StackTemplate controller that
// installs the kinds it serves, for every test of the package. No Stack controller runs:
// each test plays its part, writing the status (and the exported outputs) of the Stacks
// the instances become. Templates and their kinds are cluster-scoped: each test names its
// own after itself.
var (
	env *kubetest.Env
	// recorder checks the events about instances; the manager's recorder sends them on.
	recorder *kubetest.Recorder[*unstructured.Unstructured]
)

const (
	// group is the API group of the package's templates but the approval test's.
	group = "instances.test.stackwright.dev"
	// approvalGroup is the approval test's: the admission policy it installs judges the
	// instances of this group only.
	approvalGroup = "approvals.test.stackwright.dev"
	// approvalPolicy names the policy and binding the instance controller trusts.
	approvalPolicy = "instance-suite-approvals"
)

func TestMain(m *testing.M) { kubetest.Main(m, &env, kubetest.Manager(setupManager)) }

func setupManager(_ context.Context, e *kubetest.Env, _ string) (ctrl.Manager, error) {
	// As in the manager: only the definitions templates made are cached.
	mgr, err := e.NewManager(ctrl.Options{Cache: kubetest.ManagerCache()})
	if err != nil {
		return nil, err
	}
	recorder = kubetest.NewRecorder(e.Client, announced)
	instances := &instance.Controller{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Cache: mgr.GetCache(),
		Recorder: recorder.Wrap(mgr.GetEventRecorder("stackwright")), ApprovalPolicy: approvalPolicy, ObjectKinds: objectKinds,
	}
	if err := instances.SetupWithManager(context.Background(), mgr, controller.Options{}); err != nil {
		return nil, err
	}
	templates := &stacktemplate.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), AllowedGroups: []string{group, approvalGroup}, ObjectKinds: objectKinds, Instances: instances}
	if err := templates.SetupWithManager(context.Background(), mgr, controller.Options{}); err != nil {
		return nil, fmt.Errorf("failed to set up StackTemplate controller: %w", err)
	}
	return mgr, nil
}

var (
	createdFrom = regexp.MustCompile(`from revision (\d+) of`)
	lastUpdate  = regexp.MustCompile(`^(\S+) (\S+): `)
)

// announced says what e announces that the stored instance does not show: the revision
// its Stack was created from, and the last operation of that Stack.
func announced(e kubetest.Event, _, stored *unstructured.Unstructured) error {
	switch e.Reason {
	case instance.EventStackCreated:
		want := createdFrom.FindStringSubmatch(e.Message)
		rev, _, _ := unstructured.NestedInt64(stored.Object, "status", "templateRevision")
		if want == nil || strconv.FormatInt(rev, 10) != want[1] {
			return fmt.Errorf("%q, but status.templateRevision is %d", e.Message, rev)
		}
	case instance.EventUpdateSucceeded, instance.EventUpdateFailed:
		want := lastUpdate.FindStringSubmatch(e.Message)
		typ, _, _ := unstructured.NestedString(stored.Object, "status", "lastUpdate", "type")
		state, _, _ := unstructured.NestedString(stored.Object, "status", "lastUpdate", "state")
		if want == nil || typ != want[1] || state != want[2] {
			return fmt.Errorf("%q, but status.lastUpdate is %s %s", e.Message, typ, state)
		}
	}
	return nil
}

// objectKinds are the kinds the package's templates may make in their instances'
// namespaces, the manager's default.
var objectKinds = []schema.GroupKind{{Kind: "ConfigMap"}, {Group: "networking.k8s.io", Kind: "NetworkPolicy"}}

// scenario is one test's share of the control plane: the tenant's namespace (the
// kubetest scenario's), where its instances live, and a platform namespace for their
// Stacks.
type scenario struct {
	*kubetest.Scenario
	t        *testing.T
	g        *WithT
	platform string
}

func newScenario(t *testing.T) *scenario {
	return &scenario{Scenario: env.Scenario(t), t: t, g: NewWithT(t), platform: env.Namespace(t)}
}

// label sets labels on the tenant's namespace.
func (s *scenario) label(set map[string]string) {
	s.t.Helper()
	ns := &corev1.Namespace{}
	s.g.Expect(env.Client.Get(s.t.Context(), client.ObjectKey{Name: s.Namespace}, ns)).To(Succeed())
	ns.Labels = labels.Merge(ns.Labels, set)
	s.g.Expect(env.Client.Update(s.t.Context(), ns)).To(Succeed())
}

// template returns a template of kind (plural: its lower case, plus "s") in group, named
// after the plural, whose Stacks go to the scenario's platform namespace.
func (s *scenario) template(group, kind, stack string) *v1alpha1.StackTemplate {
	plural := toPlural(kind)
	return &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: plural},
		Spec: v1alpha1.StackTemplateSpec{
			API:       v1alpha1.TemplateAPI{Group: group, Kind: kind, Plural: plural},
			Namespace: s.platform,
			Stack:     apiextensionsv1.JSON{Raw: []byte(stack)},
		},
	}
}

func toPlural(kind string) string {
	b := []byte(kind)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b) + "s"
}

// serve creates tmpl, deletes it when the test ends (if the test has not), and waits
// until its kind is served, to the test's client too: the API server may announce a
// definition established before its discovery lists the kind.
func (s *scenario) serve(tmpl *v1alpha1.StackTemplate) {
	s.t.Helper()
	s.g.Expect(env.Client.Create(s.t.Context(), tmpl)).To(Succeed())
	s.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tmpl) })
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(tmpl.GVK().GroupVersion().WithKind(tmpl.Spec.API.Kind + "List"))
	s.waitTemplate(tmpl, "the template is served", func(g Gomega) {
		g.Expect(env.Client.List(s.t.Context(), list)).To(Succeed())
	})
}

// waitTemplate waits until tmpl is Ready and check holds of it.
func (s *scenario) waitTemplate(tmpl *v1alpha1.StackTemplate, why string, check func(Gomega)) {
	s.t.Helper()
	s.g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(s.t.Context(), client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(tmpl.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "conditions: %v", tmpl.Status.Conditions)
		check(g)
	}).WithTimeout(waitTimeout).WithPolling(waitPolling).Should(Succeed(), why)
}

// Waits as long as kubetest's: the package's tests run in parallel on a shared machine.
const (
	waitTimeout = 3 * time.Minute
	waitPolling = 250 * time.Millisecond
)

// instance returns an instance of tmpl's kind in the tenant's namespace, with the given
// spec (JSON).
func (s *scenario) instance(tmpl *v1alpha1.StackTemplate, name, spec string) *unstructured.Unstructured {
	s.t.Helper()
	u := &unstructured.Unstructured{}
	s.g.Expect(json.Unmarshal(fmt.Appendf(nil, `{"apiVersion":%q,"kind":%q,"metadata":{"namespace":%q,"name":%q},"spec":%s}`,
		tmpl.GVK().GroupVersion().String(), tmpl.Spec.API.Kind, s.Namespace, name, spec), &u.Object)).To(Succeed())
	return u
}

// waitInstance waits until the instance's condition typ is True, with reason unless it
// is "", for its current generation, and returns the instance as then read.
func (s *scenario) waitInstance(inst *unstructured.Unstructured, typ, reason, why string) *unstructured.Unstructured {
	s.t.Helper()
	got := inst.DeepCopy()
	s.g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(s.t.Context(), client.ObjectKeyFromObject(inst), got)).To(Succeed())
		c := condition(got, typ)
		g.Expect(c).NotTo(BeNil(), "status: %v", got.Object["status"])
		g.Expect(c["status"]).To(Equal("True"), "status: %v", got.Object["status"])
		g.Expect(c["observedGeneration"]).To(BeEquivalentTo(got.GetGeneration()), "status: %v", got.Object["status"])
		if reason != "" {
			g.Expect(c["reason"]).To(Equal(reason), "status: %v", got.Object["status"])
		}
	}).WithTimeout(waitTimeout).WithPolling(waitPolling).Should(Succeed(), why)
	return got
}

// condition is the instance's condition typ, nil when it has none.
func condition(u *unstructured.Unstructured, typ string) map[string]any {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range list {
		if m, _ := c.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}

// waitStack waits until the instance's Stack exists in the platform namespace and check
// holds of it, and returns it.
func (s *scenario) waitStack(inst *unstructured.Unstructured, why string, check func(Gomega, *pulumiv1.Stack)) *pulumiv1.Stack {
	s.t.Helper()
	var st *pulumiv1.Stack
	s.g.Eventually(func(g Gomega) {
		st = s.stackOf(g, inst)
		check(g, st)
	}).WithTimeout(waitTimeout).WithPolling(waitPolling).Should(Succeed(), why)
	return st
}

// stackOf reads the one Stack of the instance.
func (s *scenario) stackOf(g Gomega, inst *unstructured.Unstructured) *pulumiv1.Stack {
	var list pulumiv1.StackList
	g.Expect(env.Client.List(s.t.Context(), &list, client.InNamespace(s.platform),
		client.MatchingLabels{v1alpha1.InstanceNamespaceLabel: inst.GetNamespace()})).To(Succeed())
	var found []*pulumiv1.Stack
	for i := range list.Items {
		if list.Items[i].Annotations[v1alpha1.InstanceAnnotation] == inst.GetNamespace()+"/"+inst.GetName() {
			found = append(found, &list.Items[i])
		}
	}
	g.Expect(found).To(HaveLen(1), "Stacks of %s/%s", inst.GetNamespace(), inst.GetName())
	return found[0]
}

// setStackStatus plays the Stack controller: it sets the status of the Stack st names as
// mutate makes it, and leaves st as written.
func (s *scenario) setStackStatus(st *pulumiv1.Stack, mutate func(*pulumiv1.Stack)) {
	s.t.Helper()
	s.g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(s.t.Context(), client.ObjectKeyFromObject(st), st); err != nil {
			return err
		}
		mutate(st)
		return env.Client.Status().Update(s.t.Context(), st)
	})).To(Succeed())
}

// stackReady makes st Ready at its generation, after an up that succeeded now.
func (s *scenario) stackReady(st *pulumiv1.Stack) {
	s.t.Helper()
	s.setStackStatus(st, func(st *pulumiv1.Stack) {
		st.Status.ObservedGeneration = st.Generation
		st.Status.Conditions = []metav1.Condition{{
			Type: pulumiv1.ConditionReady, Status: metav1.ConditionTrue, Reason: pulumiv1.ReasonProcessingCompleted,
			Message: "the stack is up to date", ObservedGeneration: st.Generation, LastTransitionTime: metav1.Now(),
		}}
		st.Status.LastUpdate = &pulumiv1.StackUpdateState{Type: "up", State: pulumiv1.UpdateStateSucceeded, Message: "up succeeded", LastResyncTime: &metav1.Time{Time: time.Now()}}
	})
}

// stackStalled stalls st at its generation with reason and msg, after an up that failed
// now.
func (s *scenario) stackStalled(st *pulumiv1.Stack, reason, msg string) {
	s.t.Helper()
	s.setStackStatus(st, func(st *pulumiv1.Stack) {
		st.Status.ObservedGeneration = st.Generation
		st.Status.Conditions = []metav1.Condition{
			{Type: pulumiv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: st.Generation, LastTransitionTime: metav1.Now()},
			{Type: pulumiv1.ConditionReady, Status: metav1.ConditionFalse, Reason: pulumiv1.ReasonNotReadyStalled, Message: msg, ObservedGeneration: st.Generation, LastTransitionTime: metav1.Now()},
		}
		st.Status.LastUpdate = &pulumiv1.StackUpdateState{Type: "up", State: pulumiv1.UpdateStateFailed, Message: msg, LastResyncTime: &metav1.Time{Time: time.Now()}}
	})
}

// exportOutputs plays the Stack controller's export of st's outputs: every one into the
// Secret its spec names, the public ones into its ConfigMap and its status.
func (s *scenario) exportOutputs(st *pulumiv1.Stack, secret, public map[string]string) {
	s.t.Helper()
	names := st.Spec.Stackwright.Outputs
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: st.Namespace, Name: names.SecretName}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: st.Namespace, Name: names.ConfigMapName}}
	for _, o := range []client.Object{sec, cm} {
		_, err := controllerutil.CreateOrUpdate(s.t.Context(), env.Client, o, func() error {
			switch o := o.(type) {
			case *corev1.Secret:
				o.Data = map[string][]byte{}
				for k, v := range secret {
					o.Data[k] = []byte(v)
				}
			case *corev1.ConfigMap:
				o.Data = public
			}
			return controllerutil.SetControllerReference(st, o, env.Scheme)
		})
		s.g.Expect(err).NotTo(HaveOccurred())
	}
	s.setStackStatus(st, func(st *pulumiv1.Stack) {
		st.Status.Outputs = map[string]apiextensionsv1.JSON{}
		for k := range secret {
			st.Status.Outputs[k] = apiextensionsv1.JSON{Raw: []byte(`"[secret]"`)}
		}
		for k, v := range public {
			raw, _ := json.Marshal(v)
			st.Status.Outputs[k] = apiextensionsv1.JSON{Raw: raw}
		}
	})
}

// waitEvent waits for an Event of reason in namespace ns about the object named name.
func (s *scenario) waitEvent(ns, name, reason string) {
	s.t.Helper()
	s.g.Eventually(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(env.Client.List(s.t.Context(), &list, client.InNamespace(ns))).To(Succeed())
		var about []string
		for _, e := range list.Items {
			if e.Regarding.Name == name {
				about = append(about, e.Reason)
			}
		}
		g.Expect(about).To(ContainElement(reason), "events about %s/%s", ns, name)
	}).WithTimeout(waitTimeout).WithPolling(waitPolling).Should(Succeed(), reason)
}

// installApprovalPolicy installs config/templates' approval policy and binding as name,
// narrowed to group as the chart narrows them to the install's template groups, for the
// test's life.
func installApprovalPolicy(t *testing.T, name, group string) {
	t.Helper()
	installTemplatePolicy(t, "stackwright-template-approvals", name, group)
}

// installTemplatePolicy installs config/templates' policy shipped (and its binding) as
// name, narrowed to group, for the test's life.
func installTemplatePolicy(t *testing.T, shipped, name, group string) {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	policies, bindings, err := kubetest.ReadAdmission(filepath.Join(root, "config", "templates"))
	if err != nil {
		t.Fatal(err)
	}
	pi := slices.IndexFunc(policies, func(p *admissionv1.ValidatingAdmissionPolicy) bool { return p.Name == shipped })
	bi := slices.IndexFunc(bindings, func(b *admissionv1.ValidatingAdmissionPolicyBinding) bool { return b.Spec.PolicyName == shipped })
	if pi < 0 || bi < 0 {
		t.Fatalf("config/templates ships no policy %s with its binding", shipped)
	}
	p, b := policies[pi], bindings[bi]
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
