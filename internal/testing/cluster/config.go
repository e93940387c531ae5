package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The cluster's addresses. The whole cluster lives in its own network namespace; the host
// reaches it over one veth pair, and nothing is routed beyond the machine.
const (
	// NetNS is the network namespace every component runs in.
	NetNS = "stackwright-cluster"
	// HostIP is the host's end of the veth pair.
	HostIP = "10.87.0.1"
	// NodeIP is the node's address: the API server, the kubelet and the Pods' gateway
	// to the control plane.
	NodeIP = "10.87.0.2"
	// PodCIDR is the node bridge's subnet.
	PodCIDR = "10.88.0.0/16"
	// ServiceCIDR is the Services' virtual range.
	ServiceCIDR = "10.96.0.0/16"
	// APIServiceIP is the ClusterIP of the default/kubernetes Service.
	APIServiceIP = "10.96.0.1"
	// APIServer is the URL the host and the components use.
	APIServer = "https://" + NodeIP + ":6443"

	hostVeth = "swc-host"
	nodeVeth = "swc-node"
	linkCIDR = "/30"
	// PauseImage is the sandbox image; it is built locally and imported, never pulled.
	PauseImage = "registry.k8s.io/pause:3.10.1"
)

// layout names every file and directory of a cluster. Paths that end up in unix socket
// addresses live under run, which is short, because sockets are limited to 108 bytes.
type layout struct {
	dir string // persistent state: pki, etcd, images, kubelet and containerd roots, logs
	run string // sockets and pid files
}

func (l layout) pki() string                 { return filepath.Join(l.dir, "pki") }
func (l layout) pkiFile(name string) string  { return filepath.Join(l.dir, "pki", name) }
func (l layout) log(component string) string { return filepath.Join(l.dir, "logs", component+".log") }
func (l layout) conf(name string) string     { return filepath.Join(l.dir, "conf", name) }
func (l layout) kubeconfig(user string) string {
	return filepath.Join(l.dir, "conf", user+".kubeconfig")
}

// AdminKubeconfig is the kubeconfig for kubectl on the host.
func (l layout) AdminKubeconfig() string   { return filepath.Join(l.dir, "kubeconfig") }
func (l layout) containerdSocket() string  { return filepath.Join(l.run, "containerd.sock") }
func (l layout) supervisorPID() string     { return filepath.Join(l.run, "supervisor.pid") }
func (l layout) readyFile() string         { return filepath.Join(l.run, "ready") }
func (l layout) kubeletRoot() string       { return filepath.Join(l.dir, "kubelet") }
func (l layout) containerdRoot() string    { return filepath.Join(l.dir, "containerd") }
func (l layout) containerdState() string   { return filepath.Join(l.run, "containerd") }
func (l layout) cniConfDir() string        { return filepath.Join(l.dir, "cni") }
func (l layout) volumes() string           { return filepath.Join(l.dir, "volumes") }
func (l layout) etcdData() string          { return filepath.Join(l.dir, "etcd") }
func (l layout) resolvConf() string        { return l.conf("resolv.conf") }
func (l layout) kubeletConfig() string     { return l.conf("kubelet.yaml") }
func (l layout) kubeProxyConfig() string   { return l.conf("kube-proxy.yaml") }
func (l layout) containerdConfig() string  { return l.conf("containerd.toml") }
func (l layout) registryHosts() string     { return l.conf("certs.d") }
func (l layout) schedulerConfig() string   { return l.conf("scheduler.yaml") }
func (l layout) cniConf() string           { return filepath.Join(l.cniConfDir(), "10-stackwright.conflist") }
func (l layout) logsDir() string           { return filepath.Join(l.dir, "logs") }
func (l layout) serviceAccountKey() string { return l.pkiFile("sa.key") }
func (l layout) serviceAccountPub() string { return l.pkiFile("sa.pub") }
func (l layout) caCert() string            { return l.pkiFile("ca.crt") }
func (l layout) caKey() string             { return l.pkiFile("ca.key") }
func (l layout) cert(name string) string   { return l.pkiFile(name + ".crt") }
func (l layout) key(name string) string    { return l.pkiFile(name + ".key") }
func (l layout) podLogs() string           { return filepath.Join(l.dir, "pod-logs") }
func (l layout) runcRoot() string          { return filepath.Join(l.run, "runc") }
func (l layout) supervisorLog() string     { return l.log("supervisor") }
func (l layout) netnsPath() string         { return filepath.Join("/var/run/netns", NetNS) }
func (l layout) dirs() []string {
	return []string{
		l.dir, l.run, l.pki(), l.logsDir(), filepath.Join(l.dir, "conf"), l.kubeletRoot(),
		l.containerdRoot(), l.containerdState(), l.cniConfDir(), l.volumes(), l.podLogs(),
		l.registryHosts(),
	}
}

// writeConfigs renders every component's configuration. They are rewritten on each start,
// so a changed harness takes effect on the next `make cluster`.
func (l layout) writeConfigs(node string) error {
	for _, c := range []struct{ user, cert string }{
		{"admin", "admin"}, {"controller-manager", "controller-manager"}, {"scheduler", "scheduler"},
		{"kube-proxy", "kube-proxy"}, {"kubelet", "kubelet"},
	} {
		path := l.kubeconfig(c.user)
		if c.user == "admin" {
			path = l.AdminKubeconfig()
		}
		if err := writeKubeconfig(path, c.user, l.caCert(), l.cert(c.cert), l.key(c.cert)); err != nil {
			return err
		}
	}
	files := map[string]string{
		l.kubeletConfig():    l.kubeletConfigYAML(),
		l.kubeProxyConfig():  l.kubeProxyConfigYAML(),
		l.containerdConfig(): l.containerdConfigTOML(),
		l.schedulerConfig():  l.schedulerConfigYAML(),
		l.cniConf():          cniConflist,
		// No cluster DNS runs here: Pods use Service environment variables, and a
		// resolver that names no server keeps lookups from leaving the node.
		l.resolvConf(): "options ndots:1\n",
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return fmt.Errorf("failed to write %s: %w", path, err)
		}
	}
	return nil
}

func writeKubeconfig(path, user, ca, cert, key string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["stackwright"] = &clientcmdapi.Cluster{Server: APIServer, CertificateAuthority: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key}
	cfg.Contexts["stackwright"] = &clientcmdapi.Context{Cluster: "stackwright", AuthInfo: user}
	cfg.CurrentContext = "stackwright"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("failed to write kubeconfig %s: %w", path, err)
	}
	return nil
}

// kubeletConfigYAML: cgroup v1 with the cgroupfs driver (no systemd here), thresholds low
// enough that a busy build machine does not evict the test's Pods, and no image garbage
// collection, since images cannot be pulled back once removed.
func (l layout) kubeletConfigYAML() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%[1]s
imageServiceEndpoint: unix://%[1]s
address: 0.0.0.0
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %[2]s
tlsPrivateKeyFile: %[3]s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[4]s
authorization:
  mode: Webhook
clusterDomain: cluster.local
resolvConf: %[5]s
failSwapOn: false
protectKernelDefaults: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 50Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
maxPods: 110
podPidsLimit: -1
localStorageCapacityIsolation: true
podLogsDir: %[6]s
`, l.containerdSocket(), l.cert("kubelet-serving"), l.key("kubelet-serving"), l.caCert(), l.resolvConf(), l.podLogs())
}

// kubeProxyConfigYAML: iptables mode inside the cluster's namespace. masqueradeAll makes
// replies of Pod → Service → Pod traffic on one bridge come back through the node, and
// the conntrack settings are left as the kernel has them (a non-initial network namespace
// cannot change them).
func (l layout) kubeProxyConfigYAML() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %s
clusterCIDR: %s
iptables:
  masqueradeAll: true
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
`, l.kubeconfig("kube-proxy"), PodCIDR)
}

func (l layout) schedulerConfigYAML() string {
	return fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
`, l.kubeconfig("scheduler"))
}

// containerdConfigTOML: the CRI plugin with runc from Debian (seccomp-enabled), the
// locally imported pause image, registry hosts from conf/certs.d (TrustRegistry), overlayfs, restrict_oom_score_adj because this sandbox
// lacks CAP_SYS_RESOURCE and cannot lower a process's OOM score, and the Pods' network
// namespaces under the cluster's own state directory so that teardown finds them all.
func (l layout) containerdConfigTOML() string {
	return fmt.Sprintf(`version = 3
root = %q
state = %q

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %q
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = %q

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  enable_selinux = false
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%q]
    conf_dir = %q
    max_conf_num = 1
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %q
        Root = %q
        SystemdCgroup = false
`, l.containerdRoot(), l.containerdState(), l.containerdSocket(), l.containerdSocket()+".ttrpc",
		PauseImage, l.registryHosts(), cniBinDir, l.cniConfDir(), runcPath, l.runcRoot())
}

// cniConflist puts Pods on one bridge in the cluster's namespace; the node is their
// gateway. No IP masquerade: nothing leaves the namespace except over the host veth.
var cniConflist = strings.TrimSpace(fmt.Sprintf(`
{
  "cniVersion": "1.0.0",
  "name": "stackwright",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}`, PodCIDR)) + "\n"

// Debian's packages (hack/cluster-packages.sh) install these.
const (
	cniBinDir = "/usr/lib/cni"
	runcPath  = "/usr/sbin/runc"
)
