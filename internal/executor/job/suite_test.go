package job_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/executor/job"
	"github.com/stackwright/stackwright/internal/manager"
	"github.com/stackwright/stackwright/internal/reaper"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/testing/memcgtest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// One real manager with the Job executor serves the package. envtest has no kubelet: the
// test's kubelet stand-in turns each runner Job into a Pod object, gets it a token bound
// to that Pod from the real API server, and runs the real runner (PodRunner, real pulumi)
// with the Job's mounted files, as the kubelet would.
var (
	env     *kubetest.Env
	apiURL  string
	kubelet *fakeKubelet
	// plugins is the plugin source the manager's plugin cache downloads from.
	plugins *pluginSource
	// managerWrites records the manager's writes (not the kubelet stand-in's, which has a
	// client of its own), by namespace.
	managerWrites = &kubetest.Writes{}
)

// managerNamespace is the manager's namespace ($POD_NAMESPACE in a cluster).
const managerNamespace = "stackwright-system"

// skipAnnotation on a Stack keeps the stand-in kubelet from running its runners.
const skipAnnotation = "test.stackwright.dev/no-kubelet"

func TestMain(m *testing.M) {
	if os.Getenv(sandboxPodDirEnv) != "" {
		// This process is a runner the stand-in kubelet started in a sandbox.
		os.Exit(runSandboxed())
	}
	kubetest.Main(m, &env, kubetest.Manager(setupManager))
}

func setupManager(ctx context.Context, e *kubetest.Env, dir string) (ctrl.Manager, error) {
	bin, err := repo.Bin()
	if err != nil {
		return nil, err
	}
	if err := repo.RequireBinaries(bin, "pulumi", "pulumi-language-yaml", "pulumi-resource-stackwright-testing"); err != nil {
		return nil, err
	}
	// The runner finds pulumi and its plugins on PATH, as in its image.
	if err := os.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH")); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	apiURL = "https://" + addr

	opts := withOptions(dir, bin, addr)
	plugins = startPluginSource(ctx)
	opts.PluginDownloadURL = plugins.url + "/releases/plugins"
	// The manager's namespace, where the destroys of Stacks in terminating namespaces run,
	// as a ServiceAccount of their own.
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.Namespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: opts.DetachedRunnerServiceAccount, Namespace: opts.Namespace}},
	} {
		if err := e.Client.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("failed to create %T %s: %w", o, o.GetName(), err)
		}
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.WrapTransport = managerWrites.Wrap
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := manager.Setup(ctx, mgr, opts); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, fmt.Errorf("failed to create clientset: %w", err)
	}
	kubelet = &fakeKubelet{client: e.Client, cs: cs, dir: dir, ran: map[string]bool{}}
	go kubelet.run(ctx)
	return mgr, nil
}

func withOptions(data, bin, addr string) *manager.Options {
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	opts.DataDir, opts.PulumiBin = data, bin
	opts.Executor = "job"
	opts.RunnerAPIAddr, opts.RunnerAPIURL = addr, "https://"+addr
	opts.Namespace = managerNamespace
	// The runners of this suite run on this machine, so a file:// backend is shared.
	opts.DefaultBackend = "file://" + filepath.Join(data, "state")
	opts.RetryBase, opts.RunnerLostGrace = time.Second, 2*time.Second
	// The package's tests run in parallel, a namespace each, and some hold their runner
	// on purpose: enough slots that they never wait for one another.
	opts.MaxConcurrentUpdates = 6
	return opts
}

// fakeKubelet runs runner Jobs the way a node would, minus containers.
type fakeKubelet struct {
	client client.Client
	cs     kubernetes.Interface
	dir    string
	mu     sync.Mutex
	ran    map[string]bool
}

func (k *fakeKubelet) run(ctx context.Context) {
	for ctx.Err() == nil {
		var jobs batchv1.JobList
		if err := k.client.List(ctx, &jobs, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}); err == nil {
			for i := range jobs.Items {
				j := &jobs.Items[i]
				// A skipped Job is looked at again on the next pass: it runs once its
				// Stack loses the annotation, as on a node that comes back, so a test that
				// lifts the annotation never races the Stack's retry.
				k.mu.Lock()
				seen := k.ran[string(j.UID)]
				k.mu.Unlock()
				if seen || k.skipped(ctx, j) {
					continue
				}
				k.mu.Lock()
				k.ran[string(j.UID)] = true
				k.mu.Unlock()
				go k.runJob(ctx, j)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (k *fakeKubelet) skipped(ctx context.Context, j *batchv1.Job) bool {
	st := &pulumiv1.Stack{}
	if err := k.client.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: j.Labels[v1alpha1.StackLabel]}, st); err != nil {
		return false
	}
	return st.Annotations[skipAnnotation] == "true"
}

// runJob creates the Job's Pod, mounts its files and runs the runner.
func (k *fakeKubelet) runJob(ctx context.Context, j *batchv1.Job) {
	pod, token, err := k.startPod(ctx, j)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake kubelet: %v\n", err)
		return
	}
	dir, err := k.mount(ctx, j, pod, token)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake kubelet: %v\n", err)
		return
	}
	if sb, ok := sandboxes.Load(j.Namespace + "/" + j.Labels[v1alpha1.StackLabel]); ok {
		if err := sb.(sandbox).run(ctx, dir); err != nil {
			fmt.Fprintf(os.Stderr, "fake kubelet: sandboxed runner of %s: %v\n", j.Name, err)
		}
		return
	}
	if err := podRunner(dir).Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "fake kubelet: runner of %s: %v\n", j.Name, err)
	}
}

// podRunner is the runner of the Pod whose files are mounted in dir.
func podRunner(dir string) *job.PodRunner {
	return &job.PodRunner{
		WorkFile: filepath.Join(dir, "work", job.WorkFile), TokenFile: filepath.Join(dir, "token"),
		Scratch: filepath.Join(dir, "scratch"), Limits: artifact.Limits{MaxBytes: 10 << 20},
		Env: engine.BaseEnv(), Report: time.Minute,
	}
}

// sandboxes holds, by namespace/stack, the sandbox the stand-in kubelet runs that Stack's
// runners in.
var sandboxes sync.Map

// sandbox is where a runner runs as a process of its own, as in a container: in a memory
// cgroup (memcgtest), with pathPrefix ahead of its PATH (plugins the suite's ./bin lacks).
type sandbox struct {
	cgroup, pathPrefix string
}

// What the stand-in kubelet tells a sandboxed runner process.
const (
	sandboxPodDirEnv = "STACKWRIGHT_TEST_SANDBOX_POD_DIR"
	sandboxCgroupEnv = "STACKWRIGHT_TEST_SANDBOX_CGROUP"
	sandboxReaperEnv = "STACKWRIGHT_TEST_SANDBOX_REAPER"
)

// run runs the runner of the Pod whose files are mounted in dir as this test binary in
// the sandbox (runSandboxed), and waits for it.
func (sb sandbox) run(ctx context.Context, dir string) error {
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), sandboxPodDirEnv+"="+dir, sandboxCgroupEnv+"="+sb.cgroup, sandboxReaperEnv+"="+reaper.Path(),
		"PATH="+sb.pathPrefix+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// runSandboxed is the sandboxed runner process: it joins its cgroup, so that pulumi and
// its plugins start in it, and runs the Pod's runner.
func runSandboxed() int {
	if err := memcgtest.Join(os.Getenv(sandboxCgroupEnv)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	reaper.Use(os.Getenv(sandboxReaperEnv))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := podRunner(os.Getenv(sandboxPodDirEnv)).Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startPod creates the Pod the Job controller would, and a token bound to it with the
// runner audience, as the kubelet's projected volume would hold.
func (k *fakeKubelet) startPod(ctx context.Context, j *batchv1.Job) (*corev1.Pod, string, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: j.Name + "-", Namespace: j.Namespace, Labels: j.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: j.Spec.Template.Spec,
	}
	if err := k.client.Create(ctx, pod); err != nil {
		return nil, "", fmt.Errorf("failed to create Pod of %s: %w", j.Name, err)
	}
	// Running, as a node reports it: a Pod left Pending would be failed as never started
	// by a run outlasting the pending timeout.
	pod.Status.Phase = corev1.PodRunning
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
		})
	}
	if err := k.client.Status().Update(ctx, pod); err != nil {
		return nil, "", fmt.Errorf("failed to report Pod of %s running: %w", j.Name, err)
	}
	token, err := boundToken(ctx, k.cs, pod, job.TokenAudience)
	return pod, token, err
}

func boundToken(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, audience string) (string, error) {
	tr, err := cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:      []string{audience},
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to get token for Pod %s: %w", pod.Name, err)
	}
	return tr.Status.Token, nil
}

func (k *fakeKubelet) mount(ctx context.Context, j *batchv1.Job, pod *corev1.Pod, token string) (string, error) {
	dir := filepath.Join(k.dir, "pods", string(pod.UID))
	var secretName string
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			secretName = v.Secret.SecretName
		}
	}
	sec := &corev1.Secret{}
	if err := k.client.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: secretName}, sec); err != nil {
		return "", fmt.Errorf("failed to get work Secret %s: %w", secretName, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "work"), 0o700); err != nil {
		return "", err
	}
	for name, data := range sec.Data {
		if err := os.WriteFile(filepath.Join(dir, "work", name), data, 0o600); err != nil {
			return "", err
		}
	}
	return dir, os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600)
}

// scenario is the harness's scenario for one test, with its namespace's default
// ServiceAccount (envtest runs no controller that would create it) and its provider
// files' directory.
type scenario struct {
	*kubetest.Scenario
	t     *testing.T
	g     Gomega
	files string
}

func newScenario(t *testing.T) *scenario {
	s := &scenario{Scenario: env.Scenario(t), t: t, g: NewWithT(t), files: t.TempDir()}
	s.Create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	return s
}

// filesStack creates a Program writing one file and a Stack running it.
func (s *scenario) filesStack(name string, annotations map[string]string) {
	s.filesStackWith(name, annotations, nil)
}

// filesStackWith is filesStack with the Stack changed by mutate before it is created.
func (s *scenario) filesStackWith(name string, annotations map[string]string, mutate func(*pulumiv1.Stack)) {
	p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Program.Resources = map[string]pulumiv1.Resource{"f": {
		Type: "stackwright-testing:index:File",
		Properties: map[string]apiextensionsv1.JSON{
			"path": {Raw: []byte(`"` + name + `.txt"`)}, "content": {Raw: []byte(`"from a runner"`)},
		},
	}}
	p.Program.Outputs = map[string]apiextensionsv1.JSON{"path": {Raw: []byte(`"${f.path}"`)}}
	s.Create(p)
	s.Create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-pass"}, StringData: map[string]string{"p": "test-only"}})
	st := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: pulumiv1.StackSpec{
			Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: name}, DestroyOnFinalize: true,
			EnvRefs: map[string]pulumiv1.ResourceRef{
				"STACKWRIGHT_TESTING_ROOT": {Type: pulumiv1.ResourceSelectorLiteral, ResourceSelector: pulumiv1.ResourceSelector{Literal: &pulumiv1.LiteralRef{Value: s.files}}},
				"PULUMI_CONFIG_PASSPHRASE": {Type: pulumiv1.ResourceSelectorSecret, ResourceSelector: pulumiv1.ResourceSelector{
					Secret: &pulumiv1.SecretSelector{Name: name + "-pass", Key: "p"},
				}},
			},
		},
	}
	if mutate != nil {
		mutate(st)
	}
	s.Create(st)
}

// waitReady waits until the Stack is Ready for its current generation, and returns it.
func (s *scenario) waitReady(name string) *pulumiv1.Stack {
	s.t.Helper()
	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: name}}
	s.WaitCondition(st, pulumiv1.ConditionReady, metav1.ConditionTrue, "")
	return st
}

func (s *scenario) updates() []v1alpha1.Update {
	var list v1alpha1.UpdateList
	s.g.Expect(env.Client.List(s.t.Context(), &list, client.InNamespace(s.Namespace))).To(Succeed())
	return list.Items
}
