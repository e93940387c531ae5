package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options describe one cluster on this machine.
type Options struct {
	// Bin holds etcd, the Kubernetes binaries, containerd and its shim, and ctr.
	Bin string
	// Dir holds the cluster's persistent state, logs and the admin kubeconfig.
	Dir string
	// RunDir holds sockets and pid files; it must be short (unix socket paths).
	RunDir string
	// Node is the node's name.
	Node string
	// Images are OCI archives imported into the node's containerd at start; the pause
	// image (PauseImage) must be among them, since nothing can be pulled.
	Images []string
	// Volumes is the number of host-path PersistentVolumes kept available for claims.
	Volumes int
	// Timeout bounds Up.
	Timeout time.Duration
	// Out receives progress messages.
	Out io.Writer
}

// DefaultOptions are the settings of `make cluster`.
func DefaultOptions() Options {
	return Options{
		Bin:     "bin",
		Dir:     "/var/lib/stackwright-cluster",
		RunDir:  "/run/stackwright-cluster",
		Node:    "stackwright-node",
		Volumes: 4,
		Timeout: 5 * time.Minute,
		Out:     os.Stderr,
	}
}

func (o Options) layout() layout { return layout{dir: o.Dir, run: o.RunDir} }

// TrustRegistry lets the node's containerd pull from the registry at host (host:port) over
// plain HTTP, as an organisation's mirror would be configured: a hosts.toml under the
// registry configuration directory, which containerd reads on every pull (no restart).
func (o Options) TrustRegistry(host string) error {
	// A cluster started before containerd had a registry configuration directory would
	// never read the file: say so rather than let the pull fail.
	conf, err := os.ReadFile(o.layout().containerdConfig())
	if err != nil {
		return fmt.Errorf("failed to read the node's containerd configuration: %w", err)
	}
	if !strings.Contains(string(conf), fmt.Sprintf("config_path = %q", o.layout().registryHosts())) {
		return errors.New("the running cluster's containerd reads no registry configuration: restart it (make cluster-down, make cluster)")
	}
	dir := filepath.Join(o.layout().registryHosts(), host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", dir, err)
	}
	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+host, "http://"+host)
	if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
		return fmt.Errorf("failed to write hosts.toml for %s: %w", host, err)
	}
	return nil
}

// Kubeconfig is the admin kubeconfig of the cluster o describes.
func (o Options) Kubeconfig() string { return o.layout().AdminKubeconfig() }

func (o *Options) absolute() error {
	for _, p := range []*string{&o.Bin, &o.Dir, &o.RunDir} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return fmt.Errorf("failed to resolve %s: %w", *p, err)
		}
		*p = abs
	}
	for i, img := range o.Images {
		abs, err := filepath.Abs(img)
		if err != nil {
			return fmt.Errorf("failed to resolve %s: %w", img, err)
		}
		o.Images[i] = abs
	}
	return nil
}

// Up starts the cluster in the background and returns when its node is Ready, or at
// once when it already runs. The supervisor it leaves behind keeps the components
// running until Down.
func Up(ctx context.Context, o Options) error {
	if err := o.absolute(); err != nil {
		return err
	}
	if err := checkHost(o.Bin); err != nil {
		return err
	}
	l := o.layout()
	if pid, alive := supervisorAlive(l); alive {
		if exists(l.readyFile()) {
			fmt.Fprintf(o.Out, "cluster: already running (supervisor pid %d)\n", pid)
			return nil
		}
		return fmt.Errorf("a cluster supervisor (pid %d) runs but is not ready; see %s or run `make cluster-down`", pid, l.supervisorLog())
	}
	for _, d := range l.dirs() {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("failed to create %s: %w", d, err)
		}
	}
	if err := setupNetwork(ctx); err != nil {
		return fmt.Errorf("failed to set up the cluster network: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("failed to find own executable: %w", err)
	}
	args := []string{"--net=" + l.netnsPath(), "--", self, "run",
		"--bin", o.Bin, "--dir", o.Dir, "--run-dir", o.RunDir, "--node", o.Node,
		"--volumes", strconv.Itoa(o.Volumes)}
	for _, img := range o.Images {
		args = append(args, "--image", img)
	}
	logf, err := os.OpenFile(l.supervisorLog(), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("failed to open supervisor log: %w", err)
	}
	defer func() { _ = logf.Close() }()
	_ = os.Remove(l.readyFile())
	cmd := exec.Command("nsenter", args...)
	cmd.Stdout, cmd.Stderr, cmd.Stdin = logf, logf, nil
	// A session of its own: the supervisor outlives `make cluster` and its terminal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failed to start cluster supervisor: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(o.Out, "cluster: starting (state %s, log %s)\n", o.Dir, l.supervisorLog())
	deadline := time.After(o.Timeout)
	for !exists(l.readyFile()) {
		select {
		case err := <-exited:
			return fmt.Errorf("cluster supervisor exited (%w):\n%s", err, tail(l.supervisorLog(), 40))
		case <-deadline:
			return fmt.Errorf("cluster not ready after %s:\n%s", o.Timeout, tail(l.supervisorLog(), 40))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	fmt.Fprintf(o.Out, "cluster: ready; export KUBECONFIG=%s\n", l.AdminKubeconfig())
	return nil
}

// Down stops the cluster and removes everything it left on the machine: containers,
// mounts, the network namespace and cgroups. With purge it also deletes its state.
// It is safe to run whatever state a crash left behind.
func Down(ctx context.Context, o Options, purge bool) error {
	if err := o.absolute(); err != nil {
		return err
	}
	l := o.layout()
	if pid, alive := supervisorAlive(l); alive {
		fmt.Fprintf(o.Out, "cluster: stopping supervisor (pid %d)\n", pid)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(2 * time.Minute)
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		if processAlive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	var errs []error
	errs = append(errs, cleanupNode(ctx, o))
	errs = append(errs, teardownNetwork(ctx))
	_ = os.RemoveAll(l.run)
	if purge {
		if err := os.RemoveAll(l.dir); err != nil {
			errs = append(errs, fmt.Errorf("failed to remove %s: %w", l.dir, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintln(o.Out, "cluster: down")
	return nil
}

// Load imports image archives into the running node's containerd, where the kubelet
// finds them (Pods must use imagePullPolicy IfNotPresent or Never: nothing is pulled).
func Load(ctx context.Context, o Options, images ...string) error {
	if err := o.absolute(); err != nil {
		return err
	}
	l := o.layout()
	if _, alive := supervisorAlive(l); !alive {
		return errNotRunning
	}
	return importImages(ctx, o.Bin, l, images, o.Out)
}

// ContentDigests lists what the node's containerd content store holds (image layers,
// configs, manifests): what the node has downloaded or imported. A benchmark compares the
// lists before and after its runs to see what they fetched, and ContentSize says how much.
func ContentDigests(ctx context.Context, o Options) ([]string, error) {
	out, err := ctr(ctx, o, "content", "ls", "--quiet")
	if err != nil {
		return nil, fmt.Errorf("failed to list the node's content: %w", err)
	}
	return strings.Fields(string(out)), nil
}

// ContentSize is the size in bytes of one blob of the node's content store.
func ContentSize(ctx context.Context, o Options, digest string) (int64, error) {
	out, err := ctr(ctx, o, "content", "get", digest)
	if err != nil {
		return 0, fmt.Errorf("failed to read content %s: %w", digest, err)
	}
	return int64(len(out)), nil
}

func ctr(ctx context.Context, o Options, args ...string) ([]byte, error) {
	if err := o.absolute(); err != nil {
		return nil, err
	}
	return exec.CommandContext(ctx, filepath.Join(o.Bin, "ctr"), append([]string{"--address", o.layout().containerdSocket(), "-n", "k8s.io"}, args...)...).Output()
}

func importImages(ctx context.Context, bin string, l layout, images []string, out io.Writer) error {
	for _, img := range images {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "ctr"), "--address", l.containerdSocket(),
			"-n", "k8s.io", "images", "import", "--local", img)
		b, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("failed to import image %s: %w: %s", img, err, b)
		}
		fmt.Fprintf(out, "cluster: imported %s\n%s", img, b)
	}
	return nil
}

func supervisorAlive(l layout) (int, bool) {
	b, err := os.ReadFile(l.supervisorPID())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, processAlive(pid)
}

func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	// A zombie is gone for our purposes.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) < 3 || fields[2] != "Z"
}
