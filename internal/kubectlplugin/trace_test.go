package kubectlplugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/clip"
	"github.com/stackwright/stackwright/internal/executor/job"
	"github.com/stackwright/stackwright/internal/kubectlplugin"
)

// The test template's kind, which no controller serves: its CustomResourceDefinition is
// labelled as Stackwright labels a template's, and the tests play the instance
// controller's part, writing the instances' Stacks and statuses.
const (
	widgetGroup    = "trace.test.stackwright.dev"
	widgetTemplate = "widgets"
)

var (
	widgetsMu       sync.Mutex
	widgetsPlatform string
)

// widgets installs the Widget kind and its StackTemplate once for the package, and returns
// the template's platform namespace.
func widgets(t *testing.T) string {
	t.Helper()
	widgetsMu.Lock()
	defer widgetsMu.Unlock()
	if widgetsPlatform != "" {
		return widgetsPlatform
	}
	ctx := t.Context()
	platform := env.Namespace(t)
	open := &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + widgetGroup, Labels: map[string]string{v1alpha1.TemplateLabel: widgetTemplate}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgetGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": *open, "status": *open},
				}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
	tmpl := &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: widgetTemplate},
		Spec: v1alpha1.StackTemplateSpec{
			API:       v1alpha1.TemplateAPI{Group: widgetGroup, Kind: "Widget", Plural: "widgets"},
			Namespace: platform,
			Stack:     apiextensionsv1.JSON{Raw: []byte(`{"stack":"dev","programRef":{"name":"widget"}}`)},
		},
	}
	for _, o := range []client.Object{crd, tmpl} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("failed to create %T %s: %v", o, o.GetName(), err)
		}
	}
	// The definition is served once a new client's discovery finds the kind.
	deadline := time.Now().Add(time.Minute)
	for {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(widgetGroup + "/v1alpha1")
		list.SetKind("WidgetList")
		err := newClient(t, env.Config).List(ctx, list, client.InNamespace(platform))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Widget is not served: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	widgetsPlatform = platform
	return platform
}

// newClient is a client with discovery of its own: the CLI makes one per run, while the
// package's client discovered the API before the test's kinds existed.
func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// traceFixture holds, in a namespace of its own:
//   - Stack web, Reconciling: its current Update runs in a Job whose Pod was OOMKilled
//     once; its last Update failed, and its Job is gone;
//   - a one-off request that its current Update runs;
//   - Widget data, whose Stack in the platform namespace is Ready, its last Update run by
//     the manager (no Job); another instance's Stack sits next to it;
//   - Widget orphan, which has no Stack.
type traceFixture struct {
	*fixture
	platform, dataStack, runningJob, failedJob string
}

func newTraceFixture(t *testing.T) *traceFixture {
	t.Helper()
	f := &traceFixture{fixture: &fixture{ns: env.Namespace(t)}, platform: widgets(t)}
	ctx := t.Context()
	condition := func(typ string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}
	}
	create := func(o client.Object, status func()) {
		t.Helper()
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("failed to create %T %s: %v", o, o.GetName(), err)
		}
		if status != nil {
			status()
			if err := env.Client.Status().Update(ctx, o); err != nil {
				t.Fatalf("failed to write the status of %T %s: %v", o, o.GetName(), err)
			}
		}
	}
	update := func(ns, name string, typ v1alpha1.UpdateType, status v1alpha1.UpdateStatus) {
		u := &v1alpha1.Update{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       v1alpha1.UpdateSpec{StackName: "web", Type: typ},
		}
		create(u, func() { u.Status = status })
	}

	f.runningJob, f.failedJob = job.JobName("web-0a1b2c3d4e-2"), job.JobName("web-0a1b2c3d4e-1")
	f.stack(t, "web", func(s *pulumiv1.Stack) {
		s.Status.Conditions = []metav1.Condition{
			condition(pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonNotReadyInProgress, "the stack is being updated"),
			condition(pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonRetryingAfterFailure, "attempt 2 of revision main@sha1:abc"),
		}
		s.Status.CurrentUpdate = &pulumiv1.CurrentStackUpdate{Name: "web-0a1b2c3d4e-2"}
		s.Status.LastUpdate = &pulumiv1.StackUpdateState{Name: "web-0a1b2c3d4e-1", Type: "up", State: pulumiv1.UpdateStateFailed}
	})
	update(f.ns, "web-0a1b2c3d4e-2", v1alpha1.UpdateTypeUp, v1alpha1.UpdateStatus{
		Phase: v1alpha1.UpdatePhaseRunning, Runner: "job/" + f.ns + "/" + f.runningJob,
		Conditions: []metav1.Condition{condition(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRunning, "running")},
	})
	update(f.ns, "web-0a1b2c3d4e-1", v1alpha1.UpdateTypeUp, v1alpha1.UpdateStatus{
		Phase: v1alpha1.UpdatePhaseFailed, Result: v1alpha1.UpdateResultFailed, Runner: "job/" + f.ns + "/" + f.failedJob,
		Message: "error: creating bucket:\n  AccessDenied",
		Conditions: []metav1.Condition{
			condition(v1alpha1.ConditionComplete, metav1.ConditionFalse, v1alpha1.ReasonPermanentFailure, "error: creating bucket"),
			condition(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonPermanentFailure, "error: creating bucket"),
		},
	})
	// No Job controller runs: the Job and its Pod are written as the controller and the
	// kubelet would have them.
	runner := []corev1.Container{{Name: "runner", Image: "runner"}}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.runningJob},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: runner,
		}}},
	}
	create(j, func() { j.Status = batchv1.JobStatus{Active: 1, StartTime: &metav1.Time{Time: time.Now()}} })
	p := &corev1.Pod{
		// The API server gave the Job's template the labels its selector matches.
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.runningJob + "-x7k2p", Labels: j.Spec.Template.Labels},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: runner},
	}
	create(p, func() {
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "runner", Image: "runner", RestartCount: 1, Ready: true,
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}},
		}}}
	})
	req := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web-refresh-k8m2x"},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: "web", Type: autov1alpha1.RefreshType},
	}
	create(req, func() {
		req.Status = autov1alpha1.UpdateStatus{Update: "web-0a1b2c3d4e-2", Conditions: []metav1.Condition{
			condition(autov1alpha1.ConditionProgressing, metav1.ConditionTrue, "Running", "running as Update web-0a1b2c3d4e-2"),
			condition(autov1alpha1.ConditionComplete, metav1.ConditionFalse, "Running", "running as Update web-0a1b2c3d4e-2"),
		}}
	})

	widget := func(name string, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
		u.SetAPIVersion(widgetGroup + "/v1alpha1")
		u.SetKind("Widget")
		u.SetNamespace(f.ns)
		u.SetName(name)
		create(u, func() { u.Object["status"] = status })
		return u
	}
	data := widget("data", map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "ProcessingCompleted", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"},
	}})
	widget("orphan", map[string]any{"conditions": []any{
		map[string]any{"type": "Reconciling", "status": "True", "reason": "StackCreating", "message": "creating the Stack", "lastTransitionTime": "2025-01-01T00:00:00Z"},
	}})
	f.dataStack = "widgets-" + f.ns + "-data-0123456789abcdef"
	instanceStack := func(name, uid string, status func(*pulumiv1.Stack)) {
		s := &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.platform, Name: name, Labels: map[string]string{
				v1alpha1.TemplateLabel: widgetTemplate, v1alpha1.InstanceUIDLabel: uid, v1alpha1.InstanceNamespaceLabel: f.ns,
			}},
			Spec: pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "widget"}},
		}
		create(s, func() { status(s) })
	}
	instanceStack(f.dataStack, string(data.GetUID()), func(s *pulumiv1.Stack) {
		s.Status.Conditions = []metav1.Condition{condition(pulumiv1.ConditionReady, metav1.ConditionTrue, pulumiv1.ReasonProcessingCompleted, "")}
		s.Status.LastUpdate = &pulumiv1.StackUpdateState{Name: f.dataStack + "-1", Type: "up", State: pulumiv1.UpdateStateSucceeded}
	})
	instanceStack("widgets-"+f.ns+"-other-0123456789abcdef", "another-uid", func(s *pulumiv1.Stack) {})
	u := &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.platform, Name: f.dataStack + "-1"},
		Spec:       v1alpha1.UpdateSpec{StackName: f.dataStack, Type: v1alpha1.UpdateTypeUp},
	}
	create(u, func() {
		u.Status = v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseSucceeded, Result: v1alpha1.UpdateResultSucceeded,
			Runner: "local/manager-0/1/abcdef", Message: "1 created",
			Conditions: []metav1.Condition{condition(v1alpha1.ConditionComplete, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, "1 created")}}
	})
	f.now = time.Now().Add(time.Hour)
	return f
}

// trace runs the plugin with a client of its own, as user (admin when empty), each rule
// granted cluster-wide.
func (f *traceFixture) trace(t *testing.T, user string, rules []rbacv1.PolicyRule, args ...string) (string, error) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	if user != "" {
		name := f.ns + "-" + user
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
		}
		for _, o := range []client.Object{role, binding} {
			if err := env.Client.Create(t.Context(), o); err != nil {
				t.Fatalf("failed to create %T %s: %v", o, o.GetName(), err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
		}
		cfg.Impersonate = rest.ImpersonationConfig{UserName: name}
	}
	return f.runWith(t, newClient(t, cfg), args...)
}

func TestCommand_Trace_ShowsTheTree(t *testing.T) {
	f := newTraceFixture(t)
	ns, platform := f.ns, f.platform
	web := []string{
		"NAMESPACE NAME STATUS REASON AGE MESSAGE",
		ns + " Stack/web Reconciling RetryingAfterFailure 1h attempt 2 of revision main@sha1:abc",
		ns + " ├─ Update/web-0a1b2c3d4e-2 (current up) Running Running 1h",
		ns + " │ └─ Job/" + f.runningJob + " Running - 1h",
		ns + " │ └─ Pod/" + f.runningJob + "-x7k2p Running OOMKilled 1h restarts: 1; container runner exited with code 137",
		ns + " └─ Update/web-0a1b2c3d4e-1 (last up) Failed PermanentFailure 1h error: creating bucket: AccessDenied",
		ns + " └─ Job/" + f.failedJob + " (gone) - -",
	}
	data := []string{
		"NAMESPACE NAME STATUS REASON AGE MESSAGE",
		ns + " Widget/data Ready ProcessingCompleted 1h",
		platform + " └─ Stack/" + f.dataStack + " Ready ProcessingCompleted 1h",
		platform + " └─ Update/" + f.dataStack + "-1 (last up) Succeeded Succeeded 1h 1 created",
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"stackDownToItsPods", []string{"trace", "stack/web"}, web},
		{"typeAndNameAsTwoArguments", []string{"trace", "stk", "web"}, web},
		{"update", []string{"trace", "update/web-0a1b2c3d4e-1"}, []string{
			"NAMESPACE NAME STATUS REASON AGE MESSAGE",
			ns + " Update/web-0a1b2c3d4e-1 (up) Failed PermanentFailure 1h error: creating bucket: AccessDenied",
			ns + " └─ Job/" + f.failedJob + " (gone) - -",
		}},
		{"oneOffRequest", []string{"trace", "updates.auto.pulumi.com/web-refresh-k8m2x"}, []string{
			"NAMESPACE NAME STATUS REASON AGE MESSAGE",
			ns + " Update.auto.pulumi.com/web-refresh-k8m2x (refresh) Progressing Running 1h",
			ns + " └─ Update/web-0a1b2c3d4e-2 (up) Running Running 1h",
			ns + " └─ Job/" + f.runningJob + " Running - 1h",
			ns + " └─ Pod/" + f.runningJob + "-x7k2p Running OOMKilled 1h restarts: 1; container runner exited with code 137",
		}},
		{"instanceByKind", []string{"trace", "Widget/data"}, data},
		{"instanceByKindAndGroup", []string{"trace", "Widget." + widgetGroup + "/data"}, data},
		{"instanceWithoutStack", []string{"trace", "widgets." + widgetGroup + "/orphan"}, []string{
			"NAMESPACE NAME STATUS REASON AGE MESSAGE",
			ns + " Widget/orphan Reconciling StackCreating 1h creating the Stack",
			platform + " └─ Stack (gone) - - StackTemplate widgets has made no Stack of the instance",
		}},
		// ":6" is cobra's NoSpace and NoFileComp: a kind, and then its names.
		{"completesKinds", []string{"__complete", "trace", ""}, []string{"stack/", "update/", "widget/", ":6"}},
		{"completesNamesOfTheKind", []string{"__complete", "trace", "widget/"}, []string{"widget/data", "widget/orphan", ":4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := f.trace(t, "", nil, tt.args...)
			if err != nil {
				t.Fatalf("%v: %v", tt.args, err)
			}
			if diff := cmp.Diff(tt.want, lines(out)); diff != "" {
				t.Errorf("%v (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

// What the user may not read is a node of the tree, with the API's reason.
func TestCommand_Trace_ShowsWhatTheUserMayNotRead(t *testing.T) {
	f := newTraceFixture(t)
	// The API's error, as the table cuts it.
	forbidden := func(user, what, verb, resource, group, ns string) string {
		return clip.Line(fmt.Sprintf("%s is forbidden: User %q cannot %s resource %q in API group %q in the namespace %q",
			what, f.ns+"-"+user, verb, resource, group, ns), 60)
	}
	read := func(group string, resources ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: []string{"get", "list"}}
	}
	tests := []struct {
		name  string
		rules []rbacv1.PolicyRule
		args  []string
		want  []string
	}{
		{"tenantReadsOnlyItsInstances", []rbacv1.PolicyRule{read(widgetGroup, "widgets")}, []string{"trace", "widget/data"}, []string{
			f.ns + " Widget/data Ready ProcessingCompleted 1h",
			"- └─ StackTemplate Forbidden - - " + clip.Line("failed to get CustomResourceDefinition widgets."+widgetGroup, 60),
		}},
		// Without the definition, the template is found by its spec.api.
		{"noStacksOfThePlatform", []rbacv1.PolicyRule{read(widgetGroup, "widgets"), read(v1alpha1.GroupVersion.Group, "stacktemplates")},
			[]string{"trace", "widget/data"}, []string{
				f.ns + " Widget/data Ready ProcessingCompleted 1h",
				f.platform + " └─ Stack Forbidden - - " + forbidden("noStacksOfThePlatform", "stacks.pulumi.com", "list", "stacks", "pulumi.com", f.platform),
			}},
		{"noJobsNorPods", []rbacv1.PolicyRule{read(pulumiv1.GroupVersion.Group, "stacks"), read(v1alpha1.GroupVersion.Group, "updates")},
			[]string{"trace", "stack/web"}, []string{
				f.ns + " Stack/web Reconciling RetryingAfterFailure 1h attempt 2 of revision main@sha1:abc",
				f.ns + " ├─ Update/web-0a1b2c3d4e-2 (current up) Running Running 1h",
				f.ns + " │ └─ Job/" + f.runningJob + " Forbidden - - " + forbidden("noJobsNorPods", `jobs.batch "`+f.runningJob+`"`, "get", "jobs", "batch", f.ns),
				f.ns + " └─ Update/web-0a1b2c3d4e-1 (last up) Failed PermanentFailure 1h error: creating bucket: AccessDenied",
				f.ns + " └─ Job/" + f.failedJob + " Forbidden - - " + forbidden("noJobsNorPods", `jobs.batch "`+f.failedJob+`"`, "get", "jobs", "batch", f.ns),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := f.trace(t, tt.name, tt.rules, tt.args...)
			if err != nil {
				t.Fatalf("%v: %v", tt.args, err)
			}
			got := lines(out)
			if len(got) > 0 && got[0] == "NAMESPACE NAME STATUS REASON AGE MESSAGE" {
				got = got[1:]
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%v (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestCommand_Trace_OutputIsTheNestedTree(t *testing.T) {
	f := newTraceFixture(t)
	ns := f.ns
	int32p := func(n int32) *int32 { return &n }
	want := kubectlplugin.TraceNode{
		Kind: "Stack", APIVersion: "pulumi.com/v1", Namespace: ns, Name: "web",
		Status: "Reconciling", Reason: "RetryingAfterFailure", Message: "attempt 2 of revision main@sha1:abc",
		Children: []kubectlplugin.TraceNode{
			{
				Kind: "Update", APIVersion: "stackwright.dev/v1alpha1", Namespace: ns, Name: "web-0a1b2c3d4e-2", Role: "current",
				Status: "Running", Reason: "Running", Type: "up", Runner: "job/" + ns + "/" + f.runningJob,
				Children: []kubectlplugin.TraceNode{{
					Kind: "Job", APIVersion: "batch/v1", Namespace: ns, Name: f.runningJob, Status: "Running",
					Active: int32p(1), Succeeded: int32p(0), Failed: int32p(0),
					Children: []kubectlplugin.TraceNode{{
						Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: f.runningJob + "-x7k2p", Status: "Running",
						Reason: "OOMKilled", Message: "container runner exited with code 137", Restarts: int32p(1),
					}},
				}},
			},
			{
				Kind: "Update", APIVersion: "stackwright.dev/v1alpha1", Namespace: ns, Name: "web-0a1b2c3d4e-1", Role: "last",
				Status: "Failed", Reason: "PermanentFailure", Message: "error: creating bucket:\n  AccessDenied",
				Type: "up", Result: "failed", Runner: "job/" + ns + "/" + f.failedJob,
				Children: []kubectlplugin.TraceNode{{Kind: "Job", APIVersion: "batch/v1", Namespace: ns, Name: f.failedJob, Status: "Gone"}},
			},
		},
	}
	// Timestamps and conditions are the objects' own.
	ignore := cmpopts.IgnoreFields(kubectlplugin.TraceNode{}, "CreationTimestamp", "Conditions")
	for _, tt := range []struct {
		format    string
		unmarshal func([]byte, any) error
	}{
		{"json", json.Unmarshal},
		{"yaml", func(b []byte, v any) error { return yaml.Unmarshal(b, v) }},
	} {
		t.Run(tt.format, func(t *testing.T) {
			out, err := f.trace(t, "", nil, "trace", "stack/web", "-o", tt.format)
			if err != nil {
				t.Fatal(err)
			}
			var got kubectlplugin.TraceNode
			if err := tt.unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("trace -o %s printed no tree: %v\n%s", tt.format, err, out)
			}
			if diff := cmp.Diff(want, got, ignore); diff != "" {
				t.Errorf("trace -o %s (-want +got):\n%s", tt.format, diff)
			}
			if got.CreationTimestamp == nil || len(got.Conditions) != 2 {
				t.Errorf("trace -o %s: the Stack's creationTimestamp %v, conditions %v", tt.format, got.CreationTimestamp, got.Conditions)
			}
		})
	}
}

func TestCommand_Trace_ErrorsNameTheTarget(t *testing.T) {
	f := newTraceFixture(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "settings"}}
	if err := env.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknownStack", []string{"trace", "stack/nope"}, fmt.Sprintf(`failed to get Stack %s/nope: stacks.pulumi.com "nope" not found`, f.ns)},
		{"unknownUpdate", []string{"trace", "update/nope"}, fmt.Sprintf(`failed to get Update %s/nope: updates.stackwright.dev "nope" not found`, f.ns)},
		{"unknownInstance", []string{"trace", "widget/nope"}, fmt.Sprintf(`failed to get Widget.%s %s/nope: widgets.%s "nope" not found`, widgetGroup, f.ns, widgetGroup)},
		{"unknownKind", []string{"trace", "gadget/x"}, `failed to resolve kind "gadget": no matches for /, Resource=gadget`},
		{"notAnInstance", []string{"trace", "configmap/settings"},
			fmt.Sprintf("ConfigMap %s/settings is not an instance of a StackTemplate: no CustomResourceDefinition defines its kind", f.ns)},
		{"notTypeSlashName", []string{"trace", "web"}, `want TYPE/NAME (stack/web, update/web-0a1b2c3d4e-1, or an instance's kind: buckets/data), got "web"`},
		{"unknownFormat", []string{"trace", "stack/web", "-o", "xml"}, `unknown output format "xml": want json or yaml`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := f.trace(t, "", nil, tt.args...)
			if err == nil {
				t.Fatalf("%v succeeded and printed %q; want error %q", tt.args, out, tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("%v error (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}
