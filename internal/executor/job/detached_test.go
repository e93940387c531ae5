package job

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/executor"
	"github.com/stackwright/stackwright/internal/scheme"
)

// newDetachingExecutor is an executor of the manager in namespace "sw" whose detached
// runners run as "detached", as a (re)started manager has it after adopting.
func newDetachingExecutor(c client.Client) *Executor {
	e := &Executor{
		client: c, reader: c, runner: stubRunner{stack: &pulumiv1.Stack{}}, url: "https://manager", now: time.Now,
		opts:     Options{Pod: PodOptions{Image: "runner:1"}, Namespace: "sw", DetachedServiceAccount: "detached", LostGrace: time.Second},
		queue:    executor.NewQueue[struct{}](executor.Limits{Max: 2}),
		detached: map[types.NamespacedName]*detachedRun{}, adopted: make(chan struct{}),
	}
	return e
}

// startedDetachedDestroy is a detaching executor on a fake API server that has started
// the runner of a detached destroy, and that destroy's Update as requested.
func startedDetachedDestroy(t *testing.T) (client.Client, *Executor, *v1alpha1.Update) {
	t.Helper()
	sch, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(sch).Build()
	e := newDetachingExecutor(c)
	close(e.adopted)
	u := testUpdate("web-destroy-1")
	u.UID, u.Spec.Type = "", v1alpha1.UpdateTypeDestroy
	e.RunDetached(t.Context(), u)
	if err := e.startDetached(t.Context(), client.ObjectKeyFromObject(u)); err != nil {
		t.Fatal(err)
	}
	return c, e, u
}

// A detached destroy's runner Job goes to the manager's namespace, as the detached
// ServiceAccount without its token, and carries its Update: a manager restarted while it
// runs adopts it (the Stack finds its Update running, not vanished), records its result,
// and deletes the work Secret.
func TestExecutor_Detached_AdoptedAfterRestartAndRecorded(t *testing.T) {
	c, first, u := startedDetachedDestroy(t)
	running, ok := first.Detached(u.Namespace, u.Name)
	if !ok || running.Status.Phase != v1alpha1.UpdatePhaseRunning || running.UID == "" {
		t.Fatalf("detached Update = %+v, %v; want it running with a UID", running, ok)
	}
	var jobs batchv1.JobList
	if err := c.List(t.Context(), &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		t.Fatalf("%d runner Jobs; want 1", len(jobs.Items))
	}
	j := jobs.Items[0]
	pod := j.Spec.Template.Spec
	if j.Namespace != "sw" || pod.ServiceAccountName != "detached" || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken || j.Labels[LabelDetached] != "true" {
		t.Errorf("runner Job %s/%s runs as %q (token mounted: %v), labels %v", j.Namespace, j.Name, pod.ServiceAccountName, pod.AutomountServiceAccountToken, j.Labels)
	}
	work := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "sw", Name: j.Name + "-work"}, work); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(work, &j) {
		t.Errorf("work Secret owners = %v; want the Job", work.OwnerReferences)
	}

	// A new manager knows nothing but what the API server holds.
	second := newDetachingExecutor(c)
	if err := second.adoptDetached(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(second.adopted)
	adopted, ok := second.Detached(u.Namespace, u.Name)
	if !ok || adopted.UID != running.UID || adopted.Status.Phase != v1alpha1.UpdatePhaseRunning {
		t.Fatalf("adopted Update = %+v, %v; want %s running", adopted, ok, running.UID)
	}
	if _, n := second.Pending(); n != 1 {
		t.Errorf("%d runners hold a slot; want the adopted one", n)
	}

	res := &Result{UpdateUID: string(running.UID), Status: v1alpha1.UpdateStatus{
		Phase: v1alpha1.UpdatePhaseSucceeded, Result: v1alpha1.UpdateResultSucceeded,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSucceeded}},
	}}
	if err := second.record(t.Context(), adopted, res); err != nil {
		t.Fatal(err)
	}
	done, ok := second.Detached(u.Namespace, u.Name)
	if !ok || done.Status.Phase != v1alpha1.UpdatePhaseSucceeded {
		t.Fatalf("recorded Update = %+v, %v; want it succeeded", done, ok)
	}
	if _, ok := second.Detached(u.Namespace, u.Name); ok {
		t.Error("a finished detached Update is still there after its Stack read it")
	}
	if _, n := second.Pending(); n != 0 {
		t.Errorf("%d runners hold a slot after the result; want 0", n)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(work), &corev1.Secret{}); err == nil {
		t.Error("the work Secret, which holds the Stack's secrets, outlived the run")
	}
}

// changingRunner resolves Requests from whatever the tenant's inputs are at the moment.
type changingRunner struct {
	stubRunner
	env   *string
	calls *int
}

func (r changingRunner) Request(context.Context, *v1alpha1.Update) (*pulumiv1.Stack, engine.Request, error) {
	*r.calls++
	return r.stack, engine.Request{Operation: engine.OpDestroy, Stack: "dev", Env: map[string]string{"CLOUD_ACCOUNT": *r.env}}, nil
}

// A detached destroy runs what was decided: its Stack and inputs are read once, when its
// namespace's deletion made it detached, and a tenant that changes them while the run
// waits for a slot changes nothing of the Job the manager's namespace gets.
func TestExecutor_RunDetached_InputsPinnedWhenDecided(t *testing.T) {
	sch, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(sch).Build()
	e := newDetachingExecutor(c)
	close(e.adopted)
	env, calls := "account-at-deletion", 0
	e.runner = changingRunner{stubRunner: stubRunner{stack: &pulumiv1.Stack{}}, env: &env, calls: &calls}
	u := testUpdate("web-destroy-1")
	u.UID, u.Spec.Type = "", v1alpha1.UpdateTypeDestroy

	e.RunDetached(t.Context(), u)
	e.RunDetached(t.Context(), u) // the Stack's next reconcile, while it waits
	env = "account-the-tenant-switched-to"
	if err := e.startDetached(t.Context(), client.ObjectKeyFromObject(u)); err != nil {
		t.Fatal(err)
	}

	if calls != 1 {
		t.Errorf("inputs read %d times; want once, when the destroy was decided", calls)
	}
	var secrets corev1.SecretList
	if err := c.List(t.Context(), &secrets, client.InNamespace("sw")); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 1 {
		t.Fatalf("%d work Secrets; want 1", len(secrets.Items))
	}
	var work Work
	if err := json.Unmarshal(secrets.Items[0].Data[WorkFile], &work); err != nil {
		t.Fatal(err)
	}
	if got := work.Request.Env["CLOUD_ACCOUNT"]; got != "account-at-deletion" {
		t.Errorf("the detached run got CLOUD_ACCOUNT=%q; want the value of when it was decided", got)
	}
}

// A detached run takes nothing of the tenant's template but, where the platform allows
// it, the image: the rest was chosen for a Pod of the tenant's namespace.
func TestDetachedOverlay_KeepsOnlyTheImageTheInstallAllows(t *testing.T) {
	limits := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	full := &workspaceOverlay{
		ServiceAccountName: "tenant", Image: "tenant/pulumi:1", ImagePullPolicy: corev1.PullAlways, Resources: &limits,
		Env:       []corev1.EnvVar{{Name: "LITERAL", Value: "1"}},
		PodLabels: map[string]string{"a": "b"}, PodAnnotations: map[string]string{"c": "d"},
		NodeSelector: map[string]string{"pool": "tenant"}, Tolerations: []corev1.Toleration{{Key: "k"}},
		Volumes: []corev1.Volume{{Name: "state"}}, VolumeMounts: []corev1.VolumeMount{{Name: "state", MountPath: "/state"}},
	}
	for _, tc := range []struct {
		name         string
		in           *workspaceOverlay
		tenantImages bool
		want         *workspaceOverlay
	}{
		{name: "no template", in: nil, want: nil},
		{name: "the runner image by default", in: full, want: nil},
		{name: "the tenant's image where allowed", in: full, tenantImages: true, want: &workspaceOverlay{Image: "tenant/pulumi:1", ImagePullPolicy: corev1.PullAlways}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Executor{opts: Options{DetachedTenantImages: tc.tenantImages}}
			if diff := cmp.Diff(tc.want, e.detachedOverlay(tc.in)); diff != "" {
				t.Errorf("detachedOverlay (-want +got):\n%s", diff)
			}
		})
	}
}

// A detached run keeps the Stack's environment but what steers the engine, and never
// carries identity tokens.
func TestContainDetached_DropsEngineVariablesAndIdentityTokens(t *testing.T) {
	stack := &pulumiv1.Stack{}
	stack.Spec.Stackwright = &pulumiv1.StackwrightSpec{IdentityTokens: []pulumiv1.IdentityToken{{Audience: "sts.amazonaws.com"}}}
	env, got := containDetached(map[string]string{
		"AWS_REGION": "eu-west-1", "PULUMI_BACKEND_URL": "s3://state", "PATH": "/tmp/work/bin", "LD_PRELOAD": "/tmp/x.so", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "false",
	}, stack)
	if diff := cmp.Diff(map[string]string{"AWS_REGION": "eu-west-1", "PULUMI_BACKEND_URL": "s3://state"}, env); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
	if n := len(got.Spec.IdentityTokens()); n != 0 {
		t.Errorf("%d identity tokens kept; want none", n)
	}
	if len(stack.Spec.IdentityTokens()) != 1 {
		t.Error("the Stack read from the cache was changed")
	}
}

// A runner that cancelled its run because its Pod was evicted (a drain) reports
// Cancelled; the Update says Evicted, naming the disruption. Without the Pod's
// DisruptionTarget condition, a cancellation stays one.
func TestExecutor_Record_CancelledByEviction(t *testing.T) {
	for _, tt := range []struct {
		name       string
		disrupted  bool
		wantReason string
	}{
		{name: "evicted", disrupted: true, wantReason: v1alpha1.ReasonEvicted},
		{name: "cancelled", wantReason: v1alpha1.ReasonCancelled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, e, u := startedDetachedDestroy(t)
			running, _ := e.Detached(u.Namespace, u.Name)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: running.Namespace, Name: "runner", Labels: map[string]string{LabelUpdateUID: string(running.UID)}}}
			if tt.disrupted {
				pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}}
			}
			if err := c.Create(t.Context(), pod); err != nil {
				t.Fatal(err)
			}
			res := &Result{UpdateUID: string(running.UID), Status: v1alpha1.UpdateStatus{
				Phase: v1alpha1.UpdatePhaseFailed, Result: v1alpha1.UpdateResultCancelled, Message: "context canceled",
				Conditions: []metav1.Condition{{Type: v1alpha1.ConditionComplete, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonCancelled, Message: "context canceled"}},
			}}
			if err := e.record(t.Context(), running, res); err != nil {
				t.Fatal(err)
			}
			done, _ := e.Detached(u.Namespace, u.Name)
			got := done.Status.Conditions[0]
			for _, c := range done.Status.Conditions {
				if c.Type == v1alpha1.ConditionComplete {
					got = c
				}
			}
			if got.Reason != tt.wantReason {
				t.Errorf("Complete reason = %q (%s); want %q", got.Reason, got.Message, tt.wantReason)
			}
			if tt.disrupted && got.Message != "its runner Pod was evicted (EvictionByEvictionAPI: Eviction API: evicting); the runner cancelled its run: context canceled" {
				t.Errorf("Complete message = %q", got.Message)
			}
		})
	}
}
