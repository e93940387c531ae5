package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/crashpoint"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/testing/reapertest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

// profile is how hard a run shakes the manager; make test-chaos raises it.
type profile struct {
	stacks, kills int
	seed          uint64
}

func profileFromEnv(t *testing.T) profile {
	p := profile{stacks: 4, kills: 4, seed: uint64(time.Now().UnixNano())}
	for name, dst := range map[string]*int{"CHAOS_STACKS": &p.stacks, "CHAOS_KILLS": &p.kills} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive number", name, v)
			}
			*dst = n
		}
	}
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", v, err)
		}
		p.seed = s
	}
	return p
}

func TestManager_SIGKILL_FleetConvergesWithNothingLeftBehind(t *testing.T) {
	p := profileFromEnv(t)
	t.Logf("profile: %d Stacks, %d SIGKILLs, CHAOS_SEED=%d", p.stacks, p.kills, p.seed)
	rng := rand.New(rand.NewPCG(p.seed, 0))
	ctx := t.Context()
	dir := t.TempDir()
	m := newManager(t, dir)

	ns := env.Namespace(t)
	files := filepath.Join(dir, "files")
	names := make([]string, p.stacks)
	for i := range names {
		names[i] = fmt.Sprintf("chaos-%d", i)
		create(ctx, t, program(ns, names[i]))
		create(ctx, t, m.stack(ns, names[i], filepath.Join(files, names[i])))
	}

	m.start(t)
	crashes := 0
	crash := func() {
		time.Sleep(time.Duration(500+rng.IntN(3500)) * time.Millisecond)
		m.kill(t)
		crashes++
		if left := processesUnder(m.dataDir); len(left) > 0 {
			t.Errorf("crash %d: engine processes %v outlived the manager", crashes, left)
		}
		m.start(t)
	}
	for range p.kills {
		crash()
	}
	waitAllReady(t, m, ns, names, 10*time.Minute, "the last crash")

	// Every other Stack is deleted (destroyOnFinalize) while the crashes go on: its
	// finalizer must hold until its destroy has succeeded, whatever the crashes interrupt.
	deleted := map[string]bool{}
	for i, name := range names {
		if i%2 == 0 {
			deleted[name] = true
			if err := env.Client.Delete(ctx, &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range (p.kills + 1) / 2 {
		crash()
	}
	deadline := time.Now().Add(10 * time.Minute)
	for name := range deleted {
		for exists(ctx, t, ns, name) {
			if time.Now().After(deadline) {
				t.Fatalf("Stack %s is not gone 10 minutes after the last crash", name)
			}
			time.Sleep(time.Second)
		}
	}
	m.stop(t)

	for _, name := range names {
		got, err := os.ReadFile(filepath.Join(files, name, "out.txt"))
		switch {
		case deleted[name] && !os.IsNotExist(err):
			t.Errorf("Stack %s is gone but its program's file is still there (%v): the finalizer went before the destroy", name, err)
		case !deleted[name] && (err != nil || string(got) != name):
			t.Errorf("Stack %s: out.txt = %q, %v; want %q", name, got, err, name)
		case !deleted[name] && !ready(ctx, t, ns, name):
			t.Errorf("Stack %s is no longer Ready", name)
		}
	}
	locks := lockFiles(t, m.dataDir)
	if len(locks) > 0 {
		t.Errorf("locks left in the backend: %v", locks)
	}
	runs := succeededUpdates(t, m.dataDir)
	duplicates := 0
	for _, name := range names {
		// A destroyed stack is removed from the backend, its history with it.
		if !deleted[name] && runs[name] == 0 {
			t.Errorf("Stack %s: no succeeded update in the backend's history", name)
		}
		duplicates += max(runs[name]-1, 0)
	}
	var updates v1alpha1.UpdateList
	if err := env.Client.List(ctx, &updates, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	healed, lost := 0, 0
	for _, u := range updates.Items {
		if strings.Contains(u.Status.Message, "stale lock(s) held by run(s) that are gone") {
			healed++
		}
		if c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete); c != nil && c.Reason == v1alpha1.ReasonRunnerLost {
			lost++
		}
	}
	// Every crash was checked for engine processes left running; the manager's orderly
	// stop must leave none either.
	orphans := processesUnder(m.dataDir)
	if len(orphans) > 0 {
		t.Errorf("engine processes %v outlived the manager's stop", orphans)
	}
	// README promises an up is never applied twice: a desired state that succeeded twice
	// in the backend's history is a run recovery should have found, and a failure.
	if duplicates > 0 {
		t.Errorf("%d engine runs applied a desired state that had already succeeded (the backend's history: %v)", duplicates, runs)
	}
	t.Logf("crashes injected: %d; Updates lost with the manager: %d; stale locks healed: %d; Stacks converged (half of them then deleted): %d/%d; locks left: %d; engine runs that applied a desired state again: %d; engine processes left by crashes: 0",
		crashes, lost, healed, len(names), len(names), len(locks), duplicates)
}

// newManager builds the manager (a chaos build) into dir and prepares to run it against
// the test's control plane with args; it is not started. The test's cleanup kills it and
// whatever it left running, and shows its log if the test failed (all of it in the file
// CHAOS_KEEP_LOG names, if set).
func newManager(t *testing.T, dir string, args ...string) *manager {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin")
	if err := repo.RequireBinaries(bin, "pulumi", "pulumi-language-yaml", "pulumi-resource-stackwright-testing"); err != nil {
		t.Fatal(err)
	}
	// The API server outlives each test, and so do its Stacks: envtest deletes no
	// namespace's contents. A manager that saw an earlier test's Stacks would run them
	// too, and their runs would hit its crash points.
	owner := strconv.FormatUint(rand.Uint64(), 36)
	m := &manager{
		binary: buildManager(t, root, dir), pulumiBin: bin, dataDir: filepath.Join(dir, "data"),
		kubeconfig: writeKubeconfig(t, env.Config, dir), logPath: filepath.Join(dir, "manager.log"),
		owner: owner, args: append([]string{"--watch-label-selector", ownerLabel + "=" + owner}, args...),
	}
	t.Cleanup(func() {
		m.kill(t)
		killLeftovers(m.dataDir)
		if !t.Failed() {
			return
		}
		t.Logf("manager log (last 8 KiB):\n%s", tail(m.logPath, 8192))
		if keep := os.Getenv("CHAOS_KEEP_LOG"); keep != "" {
			if b, err := os.ReadFile(m.logPath); err == nil {
				_ = os.WriteFile(keep, b, 0o644)
			}
		}
	})
	return m
}

// manager is `stackwright manager` run as a child process, as in a Pod.
type manager struct {
	binary, pulumiBin, dataDir, kubeconfig, logPath string
	// owner is the value of ownerLabel on the Stacks this manager reconciles.
	owner string
	// args are added to every start; armed, when set, is the crash point the next start
	// arms (crashpoint.Env).
	args  []string
	armed string
	cmd   *exec.Cmd
	// exited is closed when the process started last has exited.
	exited chan struct{}
}

func (m *manager) start(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(m.binary, append([]string{"manager", "--data-dir", m.dataDir, "--pulumi-bin", m.pulumiBin,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--max-concurrent-updates", "2",
		// Each test's Stacks have a namespace of their own; they trust each other.
		"--no-tenant-isolation"}, m.args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+m.kubeconfig, crashpoint.Env+"="+m.armed)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Should the test die first, the manager goes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("failed to start the manager: %v", err)
	}
	m.cmd, m.exited = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(m.exited)
}

// kill is the crash: SIGKILL, no chance to clean up.
func (m *manager) kill(t *testing.T) {
	t.Helper()
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	<-m.exited
	m.cmd = nil
}

// dead reports whether the process started last has exited (by itself: a crash point).
func (m *manager) dead() bool {
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		m.cmd = nil
		return true
	default:
		return false
	}
}

func (m *manager) stop(t *testing.T) {
	t.Helper()
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(90 * time.Second):
		t.Error("the manager did not stop within 90 s of SIGTERM")
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
	m.cmd = nil
}

func buildManager(t *testing.T, root, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "stackwright")
	// The chaos tag makes the crash points live (internal/crashpoint); unarmed, the binary
	// behaves as a release build.
	if err := repo.GoBuild(t.Context(), root, "./cmd/stackwright", out, "chaos"); err != nil {
		t.Fatal(err)
	}
	// Next to it, where the manager finds it, as in ./bin and the images.
	if _, err := reapertest.Build(dir); err != nil {
		t.Fatal(err)
	}
	return out
}

// writeKubeconfig gives the manager process the test's admin credentials.
func writeKubeconfig(t *testing.T, cfg *rest.Config, dir string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func jsonValue(v string) apiextensionsv1.JSON {
	b, _ := json.Marshal(v) // a string always marshals
	return apiextensionsv1.JSON{Raw: b}
}

// program writes out.txt and sleeps a little, so that crashes land inside engine runs.
func program(ns, name string) *pulumiv1.Program {
	p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	p.Program.Resources = map[string]pulumiv1.Resource{
		"nap": {Type: "stackwright-testing:index:Sleep", Properties: map[string]apiextensionsv1.JSON{"seconds": {Raw: []byte("1")}}},
		"out": {Type: "stackwright-testing:index:File", Properties: map[string]apiextensionsv1.JSON{
			"path": jsonValue("out.txt"), "content": jsonValue(name),
		}},
	}
	return p
}

// ownerLabel marks a Stack as the one manager's whose owner value it carries.
const ownerLabel = "chaos.stackwright.dev/manager"

// stack is a Stack of m's.
func (m *manager) stack(ns, name, files string) *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{ownerLabel: m.owner}},
		Spec: pulumiv1.StackSpec{
			Stack: name, ProgramRef: &pulumiv1.ProgramReference{Name: name}, DestroyOnFinalize: true,
			EnvRefs: map[string]pulumiv1.ResourceRef{"STACKWRIGHT_TESTING_ROOT": {
				Type: pulumiv1.ResourceSelectorLiteral, ResourceSelector: pulumiv1.ResourceSelector{Literal: &pulumiv1.LiteralRef{Value: files}},
			}},
		},
	}
}

func create(ctx context.Context, t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

func exists(ctx context.Context, t *testing.T, ns, name string) bool {
	t.Helper()
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pulumiv1.Stack{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func ready(ctx context.Context, t *testing.T, ns, name string) bool {
	t.Helper()
	s := &pulumiv1.Stack{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	c := apimeta.FindStatusCondition(s.Status.Conditions, pulumiv1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == s.Generation
}

// lockFiles lists the lock files of the default file:// backends (one per namespace).
func lockFiles(t *testing.T, dataDir string) []string {
	t.Helper()
	var locks []string
	err := filepath.WalkDir(filepath.Join(dataDir, "state"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, "/.pulumi/locks/") {
			locks = append(locks, strings.TrimPrefix(p, dataDir))
		}
		return err
	})
	if err != nil {
		t.Fatalf("failed to read the backend: %v", err)
	}
	return locks
}

// succeededUpdates counts, per pulumi stack, the succeeded `update` runs the backend's
// history records: the truth about what was applied.
func succeededUpdates(t *testing.T, dataDir string) map[string]int {
	t.Helper()
	runs := map[string]int{}
	err := filepath.WalkDir(filepath.Join(dataDir, "state"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(p, "/.pulumi/history/") || !strings.HasSuffix(p, ".history.json") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var h struct {
			Kind   string `json:"kind"`
			Result string `json:"result"`
		}
		if err := json.Unmarshal(b, &h); err != nil {
			return fmt.Errorf("failed to read %s: %w", p, err)
		}
		if h.Kind == "update" && h.Result == "succeeded" {
			runs[filepath.Base(filepath.Dir(p))]++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("failed to read the backend's history: %v", err)
	}
	return runs
}

// processesUnder lists the processes whose working directory is inside dir (the engine's:
// reapers, pulumi, its plugins), waiting up to a few seconds for them to go.
func processesUnder(dir string) []string {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if found := processesNow(dir, ""); len(found) == 0 || time.Now().After(deadline) {
			return found
		}
	}
}

// processesNow lists the processes named comm (any when empty) whose working directory is
// inside dir, as "comm[pid]".
func processesNow(dir, comm string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || !strings.HasPrefix(cwd, dir+"/") && cwd != dir {
			continue
		}
		name, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if comm != "" && strings.TrimSpace(string(name)) != comm {
			continue
		}
		found = append(found, fmt.Sprintf("%s[%d]", strings.TrimSpace(string(name)), pid))
	}
	return found
}

// killLeftovers kills what processesUnder would find, so that the test leaves nothing
// running.
func killLeftovers(dir string) {
	for _, p := range processesUnder(dir) {
		if i := strings.LastIndex(p, "["); i >= 0 {
			if pid, err := strconv.Atoi(strings.TrimSuffix(p[i+1:], "]")); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func tail(path string, n int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// A manager whose Lease another replica takes (a partition, a paused process) must stop
// working at once: it exits, its engine runs end with it, and the replica that takes over
// once the Lease expires finishes the fleet, each desired state applied once.
func TestManager_LeaderLeaseLost_StepsDownAndHandsOver(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	ns := env.Namespace(t)
	const leaseName = "chaos-leader"
	m := newManager(t, dir, "--leader-elect", "--leader-election-namespace", ns, "--leader-election-id", leaseName)
	files := filepath.Join(dir, "files")
	names := []string{"lease-0", "lease-1", "lease-2", "lease-3"}
	for _, name := range names {
		create(ctx, t, program(ns, name))
		create(ctx, t, m.stack(ns, name, filepath.Join(files, name)))
	}
	m.start(t)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		var updates v1alpha1.UpdateList
		if err := env.Client.List(ctx, &updates, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if len(updates.Items) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the manager started no Update within 2 minutes of leading")
		}
	}

	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: leaseName}, lease); err != nil {
		t.Fatalf("the leading manager holds no Lease %s/%s: %v", ns, leaseName, err)
	}
	now := metav1.NewMicroTime(time.Now())
	lease.Spec.HolderIdentity = ptr.To("another-replica")
	lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
	if err := env.Client.Update(ctx, lease); err != nil {
		t.Fatalf("failed to take the Lease: %v", err)
	}
	select {
	case <-m.exited:
		m.cmd = nil
	case <-time.After(90 * time.Second):
		t.Fatal("the manager still runs 90 s after another replica took its Lease")
	}
	if log := tail(m.logPath, 16384); !strings.Contains(log, "leader election lost") {
		t.Errorf("the manager exited without saying it lost the leader election:\n%s", tail(m.logPath, 2048))
	}
	if left := processesUnder(m.dataDir); len(left) > 0 {
		t.Errorf("engine processes %v outlived the manager that lost its Lease", left)
	}

	m.start(t)
	waitAllReady(t, m, ns, names, 5*time.Minute, "the new leader started")
	requireAppliedOnce(t, m, names)
}

// waitAllReady waits until every named Stack is Ready, failing the test when the manager
// exits or the wait exceeds within (counted from since, which the message names).
func waitAllReady(t *testing.T, m *manager, ns string, names []string, within time.Duration, since string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, name := range names {
		for !ready(t.Context(), t, ns, name) {
			if time.Now().After(deadline) {
				t.Fatalf("Stack %s is not Ready %s after %s:\n%s", name, within, since, describe(t, ns, name))
			}
			if m.dead() {
				t.Fatalf("the manager exited:\n%s", tail(m.logPath, 4096))
			}
			time.Sleep(time.Second)
		}
	}
}

// describe is what a failing wait shows of a Stack: its status and its Updates'.
func describe(t *testing.T, ns, name string) string {
	t.Helper()
	var b strings.Builder
	var s pulumiv1.Stack
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		return err.Error()
	}
	out, _ := json.MarshalIndent(s.Status, "", "  ")
	fmt.Fprintf(&b, "generation %d, status: %s\n", s.Generation, out)
	var updates v1alpha1.UpdateList
	if err := env.Client.List(t.Context(), &updates, client.InNamespace(ns)); err != nil {
		return b.String() + err.Error()
	}
	for _, u := range updates.Items {
		if u.Spec.StackName != name {
			continue
		}
		out, _ := json.Marshal(u.Status)
		fmt.Fprintf(&b, "Update %s: %s\n", u.Name, out)
	}
	return b.String()
}

// requireAppliedOnce checks that the backend's history has exactly one succeeded update
// of each named stack, and that no lock is left.
func requireAppliedOnce(t *testing.T, m *manager, names []string) {
	t.Helper()
	runs := succeededUpdates(t, m.dataDir)
	for _, name := range names {
		if runs[name] != 1 {
			t.Errorf("Stack %s: %d succeeded updates in the backend's history; want 1", name, runs[name])
		}
	}
	if locks := lockFiles(t, m.dataDir); len(locks) > 0 {
		t.Errorf("locks left in the backend: %v", locks)
	}
}
