package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stackwright/stackwright/internal/procfs"
	"github.com/stackwright/stackwright/internal/scheme"
)

// cluster is a control plane started from ./bin with envtest, the way internal/devenv
// starts one, with an admin kubeconfig on disk for the manager.
type cluster struct {
	te         *envtest.Environment
	cfg        *rest.Config
	client     client.Client
	scheme     *runtime.Scheme
	kubeconfig string
	version    string
	// apiserver and etcd are the PIDs of the control plane's processes (0 if not found).
	apiserver, etcd int
}

func startCluster(bin, crds, dir string) (*cluster, error) {
	c := &cluster{te: &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths:     []string{crds},
		ErrorIfCRDPathMissing: true,
	}}
	cfg, err := c.te.Start()
	if err != nil {
		return nil, fmt.Errorf("failed to start control plane from %s: %w", bin, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = c.te.Stop()
		}
	}()
	admin, err := c.te.AddUser(envtest.User{Name: "stackwright-bench", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("failed to create admin user: %w", err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to render kubeconfig: %w", err)
	}
	c.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.kubeconfig, kc, 0o600); err != nil {
		return nil, fmt.Errorf("failed to write kubeconfig: %w", err)
	}
	// The harness's own traffic (creating a fleet at once) must not be throttled by
	// client-go's default 5 requests/s: we measure the manager, not our rate limiter.
	c.cfg = rest.CopyConfig(cfg)
	c.cfg.QPS, c.cfg.Burst = 500, 1000
	if c.scheme, err = scheme.New(); err != nil {
		return nil, err
	}
	if c.client, err = client.New(c.cfg, client.Options{Scheme: c.scheme}); err != nil {
		return nil, fmt.Errorf("failed to create client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create discovery client: %w", err)
	}
	if v, err := dc.ServerVersion(); err == nil {
		c.version = v.GitVersion
	} else {
		c.version = "unknown: " + err.Error()
	}
	if p := procfs.Children(os.Getpid(), "kube-apiserver"); len(p) == 1 {
		c.apiserver = p[0]
	}
	if p := procfs.Children(os.Getpid(), "etcd"); len(p) == 1 {
		c.etcd = p[0]
	}
	ok = true
	return c, nil
}

// stop stops the API server, then etcd (envtest's order).
func (c *cluster) stop() error {
	if err := c.te.Stop(); err != nil {
		return fmt.Errorf("failed to stop control plane: %w", err)
	}
	return nil
}

// managerProc is `stackwright manager` running as a child process.
type managerProc struct {
	cmd        *exec.Cmd
	args       []string
	metricsURL string
	pprofURL   string
	logPath    string
	done       chan struct{}
	err        error
}

type managerOptions struct {
	binary     string // bin/stackwright
	pulumiBin  string // absolute ./bin
	dataDir    string
	kubeconfig string
	logPath    string
	parallel   int
	extra      []string
}

func startManager(ctx context.Context, o managerOptions) (*managerProc, error) {
	metricsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	pprofAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	m := &managerProc{
		args: append([]string{
			"manager",
			"--data-dir", o.dataDir,
			"--pulumi-bin", o.pulumiBin,
			"--metrics-bind-address", metricsAddr,
			// The benchmark scrapes its own manager on loopback.
			"--metrics-secure=false",
			"--pprof-bind-address", pprofAddr,
			"--health-probe-bind-address", "0",
			"--max-concurrent-updates", strconv.Itoa(o.parallel),
			// The fleets of one namespace are one trusted benchmark: its share is all slots.
			"--max-concurrent-updates-per-namespace", "0",
			// The fleet spreads over namespaces of one trusted benchmark.
			"--no-tenant-isolation",
		}, o.extra...),
		metricsURL: "http://" + metricsAddr + "/metrics",
		pprofURL:   "http://" + pprofAddr + "/debug/pprof",
		logPath:    o.logPath,
		done:       make(chan struct{}),
	}
	logf, err := os.OpenFile(o.logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("failed to create manager log: %w", err)
	}
	m.cmd = exec.Command(o.binary, m.args...)
	m.cmd.Env = append(withoutEnv(os.Environ(), "KUBECONFIG"), "KUBECONFIG="+o.kubeconfig)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	// Should the harness die without stopping it, the manager gets SIGTERM.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := m.cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("failed to start %s: %w", o.binary, err)
	}
	go func() {
		m.err = m.cmd.Wait()
		_ = logf.Close()
		close(m.done)
	}()
	// Ready when its metrics endpoint answers.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := Scrape(ctx, m.metricsURL); err == nil {
			return m, nil
		}
		select {
		case <-m.done:
			return nil, fmt.Errorf("manager exited during start-up (%w); see %s:\n%s", m.exitErr(), o.logPath, tailFile(o.logPath, 2000))
		case <-ctx.Done():
			_ = m.stop(30 * time.Second)
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = m.stop(30 * time.Second)
			return nil, fmt.Errorf("manager's metrics endpoint did not answer within 2 minutes; see %s", o.logPath)
		}
	}
}

func (m *managerProc) pid() int { return m.cmd.Process.Pid }

// exitErr is why the manager exited; call it after done is closed.
func (m *managerProc) exitErr() error {
	if m.err == nil {
		return errors.New("exit status 0")
	}
	return m.err
}

func (m *managerProc) alive() bool {
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits up to timeout (the manager lets running updates finish for
// up to a minute), then kills it.
func (m *managerProc) stop(timeout time.Duration) error {
	if !m.alive() {
		return nil
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(timeout):
		_ = m.cmd.Process.Kill()
		<-m.done
		return fmt.Errorf("manager did not stop within %s after SIGTERM; killed", timeout)
	}
	var exit *exec.ExitError
	if m.err != nil && !errors.As(m.err, &exit) {
		return m.err
	}
	return nil
}

// profile fetches a CPU profile of the given length into path.
func (m *managerProc) profile(ctx context.Context, seconds int, path string) error {
	url := fmt.Sprintf("%s/profile?seconds=%d", m.pprofURL, seconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("failed to fetch CPU profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("failed to fetch CPU profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.ReadFrom(resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("failed to save CPU profile: %w", err)
	}
	return f.Close()
}

// freeAddr returns 127.0.0.1:<a port nobody listens on right now>.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("failed to find a free port: %w", err)
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// tailFile returns the last n bytes of the file at path.
func tailFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(0, fi.Size()-n)
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil {
		return ""
	}
	return string(b)
}

// apiserverMetrics reads the API server's own /metrics with the admin credentials.
func (c *cluster) apiserverMetrics(ctx context.Context) (Metrics, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(c.cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to make a client for the API server's metrics: %w", err)
	}
	body, err := dc.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to read the API server's metrics: %w", err)
	}
	return ParseMetrics(bytes.NewReader(body))
}
