package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Run is the supervisor: it starts the components in dependency order inside the
// cluster's network namespace (Up starts it there), keeps them running, and stops them
// and cleans the node when ctx ends.
func Run(ctx context.Context, o Options) error {
	if err := o.absolute(); err != nil {
		return err
	}
	if !inNetNS() {
		return fmt.Errorf("the supervisor must run in the %s network namespace (use `up`)", NetNS)
	}
	l := o.layout()
	if err := os.WriteFile(l.supervisorPID(), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return fmt.Errorf("failed to write pid file: %w", err)
	}
	if err := l.ensurePKI(o.Node); err != nil {
		return err
	}
	if err := l.writeConfigs(o.Node); err != nil {
		return err
	}
	logger := log.New(os.Stderr, "", log.LstdFlags)
	var running []*process
	defer func() {
		logger.Printf("stopping")
		for i := len(running) - 1; i >= 0; i-- {
			running[i].stop(30 * time.Second)
			if running[i].c.name == "kubelet" {
				// Containers outlive the kubelet; stop them while containerd still runs.
				stopContainers(context.Background(), l)
			}
		}
		if err := cleanupNode(context.Background(), o); err != nil {
			logger.Printf("cleanup: %v", err)
		}
		_ = os.Remove(l.readyFile())
		_ = os.Remove(l.supervisorPID())
		logger.Printf("stopped")
	}()
	startCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	for _, c := range o.components(l) {
		logger.Printf("starting %s", c.name)
		p, err := startProcess(c, l.log(c.name), logger)
		if err != nil {
			return err
		}
		running = append(running, p)
		if err := waitReady(startCtx, c.name, c.ready, l.log(c.name)); err != nil {
			return err
		}
		logger.Printf("%s ready", c.name)
		if c.name == "containerd" {
			if err := importImages(startCtx, o.Bin, l, o.Images, logWriter{logger}); err != nil {
				return err
			}
		}
	}
	cs, err := adminClient(l)
	if err != nil {
		return err
	}
	if err := waitReady(startCtx, "node", func(ctx context.Context) error { return nodeReady(ctx, cs, o.Node) }, l.log("kubelet")); err != nil {
		return err
	}
	if err := waitReady(startCtx, "default service account", func(ctx context.Context) error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}, l.log("controller-manager")); err != nil {
		return err
	}
	vols := volumePool{client: cs, dir: l.volumes(), size: o.Volumes, logger: logger}
	if err := vols.ensure(startCtx); err != nil {
		return err
	}
	if err := os.WriteFile(l.readyFile(), []byte(time.Now().Format(time.RFC3339)), 0o600); err != nil {
		return fmt.Errorf("failed to write ready file: %w", err)
	}
	logger.Printf("cluster ready")
	vols.recycle(ctx)
	return nil
}

// components lists the processes of the node in start order; each waits for the one
// before it to report ready.
func (o Options) components(l layout) []component {
	bin := func(name string) string { return filepath.Join(o.Bin, name) }
	return []component{
		{name: "etcd", path: bin("etcd"), args: []string{
			"--name=node", "--data-dir=" + l.etcdData(),
			"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
			"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
			"--initial-cluster=node=http://127.0.0.1:2380", "--listen-metrics-urls=http://127.0.0.1:2381",
			// A test cluster trades durability on power loss for speed.
			"--unsafe-no-fsync", "--log-level=warn",
		}, ready: httpReady("http://127.0.0.1:2379/health", nil)},
		{name: "kube-apiserver", path: bin("kube-apiserver"), args: []string{
			"--etcd-servers=http://127.0.0.1:2379",
			"--bind-address=0.0.0.0", "--secure-port=6443", "--advertise-address=" + NodeIP,
			"--tls-cert-file=" + l.cert("apiserver"), "--tls-private-key-file=" + l.key("apiserver"),
			"--client-ca-file=" + l.caCert(),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + l.serviceAccountPub(),
			"--service-account-signing-key-file=" + l.serviceAccountKey(),
			"--service-cluster-ip-range=" + ServiceCIDR,
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--kubelet-client-certificate=" + l.cert("apiserver-kubelet-client"),
			"--kubelet-client-key=" + l.key("apiserver-kubelet-client"),
			"--kubelet-certificate-authority=" + l.caCert(),
			"--kubelet-preferred-address-types=InternalIP",
			"--profiling=false",
		}, ready: httpReady("https://127.0.0.1:6443/readyz", l.adminTLS)},
		{name: "controller-manager", path: bin("kube-controller-manager"), args: []string{
			"--kubeconfig=" + l.kubeconfig("controller-manager"),
			"--authentication-kubeconfig=" + l.kubeconfig("controller-manager"),
			"--authorization-kubeconfig=" + l.kubeconfig("controller-manager"),
			"--bind-address=127.0.0.1", "--secure-port=10257",
			"--service-account-private-key-file=" + l.serviceAccountKey(),
			"--root-ca-file=" + l.caCert(),
			"--cluster-signing-cert-file=" + l.caCert(), "--cluster-signing-key-file=" + l.caKey(),
			"--use-service-account-credentials=true",
			"--service-cluster-ip-range=" + ServiceCIDR,
			"--leader-elect=false",
		}, ready: httpReady("https://127.0.0.1:10257/healthz", insecureTLS)},
		{name: "scheduler", path: bin("kube-scheduler"), args: []string{
			"--config=" + l.schedulerConfig(),
			"--authentication-kubeconfig=" + l.kubeconfig("scheduler"),
			"--authorization-kubeconfig=" + l.kubeconfig("scheduler"),
			"--bind-address=127.0.0.1", "--secure-port=10259",
		}, ready: httpReady("https://127.0.0.1:10259/healthz", insecureTLS)},
		{name: "containerd", path: bin("containerd"), args: []string{"--config=" + l.containerdConfig()},
			// containerd finds its shim on PATH.
			env: []string{"PATH=" + o.Bin + ":" + os.Getenv("PATH")},
			ready: func(ctx context.Context) error {
				return run(ctx, bin("ctr"), "--address", l.containerdSocket(), "version")
			}},
		{name: "kubelet", path: bin("kubelet"), args: []string{
			"--config=" + l.kubeletConfig(), "--kubeconfig=" + l.kubeconfig("kubelet"),
			"--root-dir=" + l.kubeletRoot(), "--node-ip=" + NodeIP, "--hostname-override=" + o.Node,
		}, ready: httpReady("http://127.0.0.1:10248/healthz", nil)},
		{name: "kube-proxy", path: bin("kube-proxy"), args: []string{
			"--config=" + l.kubeProxyConfig(), "--hostname-override=" + o.Node,
		}, ready: httpReady("http://127.0.0.1:10256/healthz", nil)},
	}
}

func (l layout) adminTLS() *tls.Config {
	cert, err := tls.LoadX509KeyPair(l.cert("admin"), l.key("admin"))
	if err != nil {
		return nil
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true} //nolint:gosec // loopback health probe of our own server
}

func insecureTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback health probe of our own server
}

func httpReady(url string, tlsConfig func() *tls.Config) func(context.Context) error {
	return func(ctx context.Context) error {
		tr := &http.Transport{}
		if tlsConfig != nil {
			tr.TLSClientConfig = tlsConfig()
		}
		defer tr.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
}

func adminClient(l layout) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", l.AdminKubeconfig())
	if err != nil {
		return nil, fmt.Errorf("failed to load admin kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create client: %w", err)
	}
	return cs, nil
}

func nodeReady(ctx context.Context, cs kubernetes.Interface, name string) error {
	node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node %s not ready: %s: %s", name, c.Reason, c.Message)
		}
	}
	return fmt.Errorf("node %s has no Ready condition yet", name)
}

// logWriter sends progress lines to the supervisor's log.
type logWriter struct {
	l interface{ Printf(string, ...any) }
}

func (w logWriter) Write(p []byte) (int, error) {
	w.l.Printf("%s", p)
	return len(p), nil
}
