package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/bench"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/testing/cluster"
	"github.com/stackwright/stackwright/internal/testing/ociregistry"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

const (
	ns     = "bench-plugins"
	s3NS   = "bench-plugins-s3"
	s3Port = 7070
	// s3User is the versitygw image's user, which must own the bucket directories.
	s3User                  = 65532
	s3Access, s3SecretValue = "bench-access-key", "bench-secret-key-not-for-production"
	stack                   = "kube"
	objects                 = 3
)

func main() {
	changes := flag.Int("changes", 10, "changes made to the Stack after its first Update, one after another")
	out := flag.String("out", "bench/results", "directory for the results file")
	flag.Parse()
	if err := run(*changes, *out); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(changes int, out string) error {
	c, err := bench.ClusterClient("make bench-plugins")
	if err != nil {
		return err
	}
	ctx := context.Background()
	backend, size, uninstall, err := install(ctx, c)
	defer uninstall()
	if err != nil {
		return err
	}
	// Leader election and caches: the first Update must not pay for them.
	time.Sleep(20 * time.Second)
	r, err := measureChanges(ctx, c, backend, changes)
	if err != nil {
		return err
	}
	r.bundleBytes = size
	if r.floor, err = floor(changes); err != nil {
		return err
	}
	report := render(r)
	fmt.Print(report)
	path := filepath.Join(out, time.Now().UTC().Format("2006-01-02")+"-plugins.md")
	return os.WriteFile(path, []byte(report), 0o644)
}

// install serves the state from versitygw and a fresh plugin bundle from a registry, and
// installs the chart with the Job executor on them; uninstall (always to be called)
// removes what was set up, last first.
func install(ctx context.Context, c client.WithWatch) (backend string, bundleBytes int64, uninstall func(), err error) {
	var undo []func()
	uninstall = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	backend, stopS3, err := startS3(ctx, c)
	if err != nil {
		return "", 0, uninstall, err
	}
	undo = append(undo, stopS3)
	if _, err := bench.Bin("kubectl", "create", "namespace", ns); err != nil {
		return "", 0, uninstall, err
	}
	undo = append(undo, func() { _, _ = bench.Bin("kubectl", "delete", "namespace", ns, "--wait", "--timeout=5m") })
	// A plugin bundle no node has pulled yet, made as a platform team makes one and pushed
	// to a registry the node pulls from: the first Update is the first on a fresh node.
	bundle, size, stopRegistry, err := freshBundle()
	if err != nil {
		return "", 0, uninstall, err
	}
	undo = append(undo, stopRegistry)
	values := filepath.Join(os.TempDir(), "bench-plugins-values.yaml")
	if err := os.WriteFile(values, []byte("executor: job\nwatchNamespaces: ["+ns+"]\nextraArgs: [\"--plugin-bundle=kubernetes="+bundle+"\"]\n"), 0o600); err != nil {
		return "", 0, uninstall, err
	}
	undo = append(undo, func() { _ = os.Remove(values) })
	// The release's images (nothing here carries test code), with that bundle instead of
	// the release's own plugins image.
	if _, err := bench.Bin("helm", "install", "stackwright", "charts/stackwright", "-n", "stackwright-system", "--create-namespace",
		"--wait", "--timeout=5m", "-f", values); err != nil {
		return "", 0, uninstall, err
	}
	undo = append(undo, func() { bench.Uninstall(ns) })
	return backend, size, uninstall, nil
}

// measureChanges applies the Stack, then changes its Program one change after the other,
// timing each from the apply to Ready after a new Update and counting the bytes the
// node's content store gained.
func measureChanges(ctx context.Context, c client.WithWatch, backend string, changes int) (result, error) {
	tl := newTimeline()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	tl.watch(wctx, c, ns)
	r := result{changes: changes}
	fresh, err := cluster.ContentDigests(ctx, cluster.DefaultOptions())
	if err != nil {
		return r, err
	}
	start := time.Now()
	if _, err := bench.KubectlApply(ns, rbacYAML+"---\n"+secretsYAML+"---\n"+programYAML(0)+"---\n"+stackYAML(backend)); err != nil {
		return r, err
	}
	first, err := waitUpdated(ctx, c, "")
	if err != nil {
		return r, err
	}
	r.first = time.Since(start)
	tl.applied(first, start)
	before, err := cluster.ContentDigests(ctx, cluster.DefaultOptions())
	if err != nil {
		return r, err
	}
	if r.firstFetched, err = fetchedSince(ctx, fresh, before); err != nil {
		return r, err
	}
	prev := first
	for i := 1; i <= changes; i++ {
		start := time.Now()
		if _, err := bench.KubectlApply(ns, programYAML(i)); err != nil {
			return r, err
		}
		u, err := waitUpdated(ctx, c, prev)
		if err != nil {
			return r, err
		}
		r.total = append(r.total, time.Since(start))
		tl.applied(u, start)
		r.updates = append(r.updates, u)
		prev = u
	}
	// The last runner's container is seen terminated a moment after its Stack is Ready.
	time.Sleep(3 * time.Second)
	after, err := cluster.ContentDigests(ctx, cluster.DefaultOptions())
	if err != nil {
		return r, err
	}
	if r.fetched, err = fetchedSince(ctx, before, after); err != nil {
		return r, err
	}
	r.phases = tl.spans(r.updates)
	r.firstPhases = tl.spans([]string{first})
	return r, nil
}

type result struct {
	changes int
	first   time.Duration
	total   []time.Duration
	updates []string
	phases  map[[2]string][]time.Duration
	floor   []time.Duration
	fetched int64
	// bundleBytes is the compressed size of the bundle's image, firstFetched what the
	// node's content store gained during the first Update, and firstPhases its milestones.
	bundleBytes, firstFetched int64
	firstPhases               map[[2]string][]time.Duration
}

// fetchedSince sums the sizes of the blobs in after that were not in before.
func fetchedSince(ctx context.Context, before, after []string) (int64, error) {
	var n int64
	for _, d := range after {
		if !slices.Contains(before, d) {
			size, err := cluster.ContentSize(ctx, cluster.DefaultOptions(), d)
			if err != nil {
				return 0, err
			}
			n += size
		}
	}
	return n, nil
}

// freshBundle builds a plugin bundle of the pinned Kubernetes provider with the
// documented command (`make plugins-image`), with a file unique to this run beside it so
// that its layer is one the node has never stored, pushes it to a registry on the host's
// end of the cluster's network, and returns its reference by digest, its compressed size
// and how to stop the registry.
func freshBundle() (ref string, size int64, stop func(), err error) {
	dir, err := os.MkdirTemp("", "bench-plugins-bundle-")
	if err != nil {
		return "", 0, nil, err
	}
	stop = func() { _ = os.RemoveAll(dir) }
	defer func() {
		if err != nil {
			stop()
		}
	}()
	reg, stopReg, err := ociregistry.Run(cluster.HostIP+":0", filepath.Join(dir, "registry"))
	if err != nil {
		return "", 0, nil, err
	}
	stop = func() {
		stopReg()
		_ = os.RemoveAll(dir)
	}
	if err := cluster.DefaultOptions().TrustRegistry(reg.Host); err != nil {
		return "", 0, nil, err
	}
	plugins := filepath.Join(dir, "plugins")
	if err := os.Mkdir(plugins, 0o755); err != nil {
		return "", 0, nil, err
	}
	if err := os.Link(filepath.Join("bin", "pulumi-resource-kubernetes"), filepath.Join(plugins, "pulumi-resource-kubernetes")); err != nil {
		return "", 0, nil, err
	}
	if err := os.WriteFile(filepath.Join(plugins, "bench-run"), []byte(time.Now().UTC().Format(time.RFC3339Nano)), 0o644); err != nil {
		return "", 0, nil, err
	}
	out, err := exec.Command("make", "--no-print-directory", "plugins-image", "PLUGINS_DIR="+plugins, "PLUGINS_REF="+reg.Host+"/bench/plugins:fresh", "PLAIN_HTTP=1").CombinedOutput()
	if err != nil {
		return "", 0, nil, fmt.Errorf("make plugins-image: %w\n%s", err, out)
	}
	m := regexp.MustCompile(`--plugin-bundle <name>=(\S+@sha256:[0-9a-f]{64})`).FindSubmatch(out)
	if m == nil {
		return "", 0, nil, fmt.Errorf("make plugins-image printed no digest:\n%s", out)
	}
	if size, err = imageSize(string(m[1])); err != nil {
		return "", 0, nil, err
	}
	return string(m[1]), size, stop, nil
}

// imageSize is the compressed size of the image ref (an index of one platform) names.
func imageSize(ref string) (int64, error) {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return 0, err
	}
	img, err := remote.Image(r)
	if err != nil {
		return 0, err
	}
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range layers {
		size, err := l.Size()
		if err != nil {
			return 0, err
		}
		n += size
	}
	return n, nil
}

// waitUpdated waits until the Stack is Ready after a successful Update other than prev,
// and returns that Update's name.
func waitUpdated(ctx context.Context, c client.Client, prev string) (string, error) {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		var st pulumiv1.Stack
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: stack}, &st); err == nil {
			lu := st.Status.LastUpdate
			if lu != nil && lu.Name != prev && lu.State == pulumiv1.UpdateStateSucceeded &&
				apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionReady) {
				return lu.Name, nil
			}
			if apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionStalled) {
				return "", fmt.Errorf("stack %s stalled: %s", stack, apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled).Message)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("stack %s not updated after 10m", stack)
}

// programYAML manages the benchmark's ConfigMaps, each holding the change's number.
func programYAML(change int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: pulumi.com/v1\nkind: Program\nmetadata:\n  name: %s\nprogram:\n  resources:\n", stack)
	for i := range objects {
		fmt.Fprintf(&b, "    cm%d:\n      type: kubernetes:core/v1:ConfigMap\n      properties:\n        metadata:\n          name: bench-%d\n          namespace: %s\n        data:\n          change: v%d\n", i, i, ns, change)
	}
	return b.String()
}

func stackYAML(backend string) string {
	return fmt.Sprintf(`apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: %[1]s
spec:
  stack: %[1]s
  programRef:
    name: %[1]s
  serviceAccountName: deployer
  backend: %[2]s
  envRefs:
    PULUMI_CONFIG_PASSPHRASE: {type: Secret, secret: {name: bench, key: passphrase}}
    AWS_ACCESS_KEY_ID: {type: Secret, secret: {name: bench, key: access}}
    AWS_SECRET_ACCESS_KEY: {type: Secret, secret: {name: bench, key: secret}}
`, stack, backend)
}

var secretsYAML = fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: bench
stringData:
  passphrase: bench-only
  access: %s
  secret: %s
`, s3Access, s3SecretValue)

var rbacYAML = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: deployer
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: deployer
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: deployer
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: deployer}
subjects: [{kind: ServiceAccount, name: deployer}]
`

// startS3 runs versitygw in the cluster on a host directory of its own, with a bucket for
// the Stack's state, and returns the Stack's backend URL.
func startS3(ctx context.Context, c client.Client) (string, func(), error) {
	dir, err := os.MkdirTemp("", "bench-plugins-s3-")
	if err != nil {
		return "", nil, err
	}
	stop := func() {
		_, _ = bench.Bin("kubectl", "delete", "namespace", s3NS, "--wait", "--timeout=3m")
		_ = os.RemoveAll(dir)
	}
	for _, d := range []string{dir, filepath.Join(dir, "state")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", stop, err
		}
		if err := os.Chown(d, s3User, s3User); err != nil {
			return "", stop, err
		}
	}
	versions, _, err := repo.Requirements(".", "hack/tools/versitygw")
	if err != nil {
		return "", stop, err
	}
	version := versions["github.com/versity/versitygw"]
	if _, err := bench.Bin("kubectl", "create", "namespace", s3NS); err != nil {
		return "", stop, err
	}
	if _, err := bench.KubectlApply(s3NS, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: s3}
spec:
  selector: {matchLabels: {app: s3}}
  template:
    metadata: {labels: {app: s3}}
    spec:
      containers:
      - name: versitygw
        image: localhost/versitygw:%[1]s
        imagePullPolicy: Never
        args: ["--port", ":%[2]d", "--access", "%[3]s", "--secret", "%[4]s", "posix", "--nometa", "/data"]
        readinessProbe: {tcpSocket: {port: %[2]d}, periodSeconds: 1}
        volumeMounts: [{name: data, mountPath: /data}]
      volumes: [{name: data, hostPath: {path: %[5]s, type: Directory}}]
---
apiVersion: v1
kind: Service
metadata: {name: s3}
spec:
  selector: {app: s3}
  ports: [{port: %[2]d, targetPort: %[2]d}]
`, version, s3Port, s3Access, s3SecretValue, dir)); err != nil {
		return "", stop, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var d appsv1.Deployment
		var svc corev1.Service
		if c.Get(ctx, client.ObjectKey{Namespace: s3NS, Name: "s3"}, &d) == nil && d.Status.ReadyReplicas == 1 &&
			c.Get(ctx, client.ObjectKey{Namespace: s3NS, Name: "s3"}, &svc) == nil && svc.Spec.ClusterIP != "" {
			return fmt.Sprintf("s3://state?endpoint=http://%s:%d&region=us-east-1&use_path_style=true", svc.Spec.ClusterIP, s3Port), stop, nil
		}
		if time.Now().After(deadline) {
			return "", stop, fmt.Errorf("S3 server not ready after 2m")
		}
		time.Sleep(time.Second)
	}
}

// floor makes the same change with the bare CLI on this machine, as often: three
// ConfigMaps through the Kubernetes provider found on PATH (a warm plugin cache), state
// in a local file:// backend, and returns each `pulumi up --skip-preview`'s wall time.
func floor(changes int) ([]time.Duration, error) {
	bin, err := filepath.Abs("bin")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-plugins-floor-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var program strings.Builder
	program.WriteString("name: floor\nruntime: yaml\nconfig:\n  change:\n    type: string\nresources:\n")
	for i := range objects {
		fmt.Fprintf(&program, "  cm%d:\n    type: kubernetes:core/v1:ConfigMap\n    properties:\n      metadata:\n        name: floor-%d\n        namespace: %s\n      data:\n        change: ${change}\n", i, i, ns)
	}
	if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(program.String()), 0o644); err != nil {
		return nil, err
	}
	for _, d := range []string{"home", "state"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	// The environment the engine gives every run, and this machine's kubeconfig.
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PULUMI_HOME="+filepath.Join(dir, "home"), "PULUMI_BACKEND_URL=file://"+filepath.Join(dir, "state"),
		"PULUMI_CONFIG_PASSPHRASE=bench-only")
	for k, v := range engine.BaseEnv() {
		env = append(env, k+"="+v)
	}
	pulumi := func(args ...string) (time.Duration, error) {
		cmd := exec.Command(filepath.Join(bin, "pulumi"), append(args, "--non-interactive")...)
		cmd.Dir, cmd.Env = dir, env
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("pulumi %s: %w\n%s", strings.Join(args, " "), err, b.String())
		}
		return time.Since(start), nil
	}
	if _, err := pulumi("stack", "init", "floor"); err != nil {
		return nil, err
	}
	var out []time.Duration
	for i := 0; i <= changes; i++ {
		if _, err := pulumi("config", "set", "change", fmt.Sprintf("v%d", i)); err != nil {
			return nil, err
		}
		d, err := pulumi("up", "--yes", "--skip-preview")
		if err != nil {
			return nil, err
		}
		if i > 0 { // the first creates; the others change, as the Stack's do
			out = append(out, d)
		}
	}
	_, err = pulumi("destroy", "--yes", "--skip-preview")
	return out, err
}

func render(r result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# A real provider under the Job executor, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "Generated by `make bench-plugins` (bench/cmd/plugins) against `make cluster` on this machine: the chart with the Job executor and the release images (`localhost/stackwright`, `localhost/stackwright-runner`); the manager offers, as the bundle every runner Pod mounts as an image volume, a bundle of the Kubernetes provider built for this run (below). One Stack whose inline Program manages %d ConfigMaps through the Kubernetes provider with its runner Pod's in-cluster credentials, state in an S3 server (versitygw) in the cluster. After its first Update, the Program is changed %d times, one after another (every ConfigMap's data changes), each timed from `kubectl apply` to the Stack Ready after a new successful Update (polled every 50 ms). The floor is the same change by the bare CLI on this machine: `pulumi up --skip-preview` of the same %d ConfigMaps with the provider on PATH (a warm plugin cache), state in a local file:// backend, through the cluster's API server; %d changes. Percentiles are nearest-rank; ratios compare figures of this run only.\n\n", objects, r.changes, objects, r.changes)
	t, f := bench.Summarize(r.total), bench.Summarize(r.floor)
	b.WriteString("| | median | p90 |\n| --- | --- | --- |\n")
	fmt.Fprintf(&b, "| Stackwright, apply → Ready | %s | %s |\n", t.P50.Round(10*time.Millisecond), t.P90.Round(10*time.Millisecond))
	fmt.Fprintf(&b, "| bare CLI, `pulumi up --skip-preview` | %s | %s |\n", f.P50.Round(10*time.Millisecond), f.P90.Round(10*time.Millisecond))
	fmt.Fprintf(&b, "\n**Stackwright / bare CLI (medians): %.2f** (goal ≤ 1.3).\n", bench.Ratio(t.P50, f.P50))
	fmt.Fprintf(&b, "\n**First Update on a fresh node** (apply → Ready of the Stack's first Update, whose runner Pod is the first on the node to mount the bundle: a bundle built for this run with `make plugins-image`, %s compressed, pulled from a registry on the host's end of the cluster's network): %s; the node's content store gained %s during it. Its phases:\n\n",
		bench.MiB(r.bundleBytes), r.first.Round(10*time.Millisecond), bench.MiB(r.firstFetched))
	b.WriteString("| phase | first Update |\n| --- | --- |\n")
	for _, p := range phases {
		if ds := r.firstPhases[p]; len(ds) > 0 {
			fmt.Fprintf(&b, "| %s → %s | %s |\n", p[0], p[1], ds[0].Round(time.Millisecond))
		}
	}
	fmt.Fprintf(&b, "\nPlugin bytes fetched by the node over the %d changes: %d (new blobs in the node's containerd content store).\n", r.changes, r.fetched)
	b.WriteString("\nWhere a change's time goes, as the benchmark's watches first saw each milestone (the runner Pod's start includes mounting the plugins image volume, which the kubelet does not time apart):\n\n")
	b.WriteString("| phase | median | p90 |\n| --- | --- | --- |\n")
	for _, p := range phases {
		if ds := r.phases[p]; len(ds) > 0 {
			s := bench.Summarize(ds)
			fmt.Fprintf(&b, "| %s → %s | %s | %s |\n", p[0], p[1], s.P50.Round(time.Millisecond), s.P90.Round(time.Millisecond))
		}
	}
	return b.String()
}
