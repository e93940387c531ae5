package cluster

import (
	"crypto/x509"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestLayout_EnsurePKI_ComponentIdentities(t *testing.T) {
	l := layout{dir: t.TempDir(), run: t.TempDir()}
	if err := l.ensurePKI("node-a"); err != nil {
		t.Fatal(err)
	}
	caDER, err := readPEM(l.caCert())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, tc := range []struct {
		name  string
		cn    string
		orgs  []string
		usage x509.ExtKeyUsage
		host  string
	}{
		{name: "apiserver", cn: "kube-apiserver", usage: x509.ExtKeyUsageServerAuth, host: APIServiceIP},
		{name: "admin", cn: "stackwright-cluster-admin", orgs: []string{"system:masters"}, usage: x509.ExtKeyUsageClientAuth},
		{name: "kubelet", cn: "system:node:node-a", orgs: []string{"system:nodes"}, usage: x509.ExtKeyUsageClientAuth},
		{name: "kubelet-serving", cn: "system:node:node-a", orgs: []string{"system:nodes"}, usage: x509.ExtKeyUsageServerAuth, host: NodeIP},
		{name: "kube-proxy", cn: "system:kube-proxy", usage: x509.ExtKeyUsageClientAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			der, err := readPEM(l.cert(tc.name))
			if err != nil {
				t.Fatal(err)
			}
			cert, err := x509.ParseCertificate(der)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{tc.usage}, DNSName: tc.host}); err != nil {
				t.Errorf("certificate does not verify: %v", err)
			}
			got := []string{cert.Subject.CommonName}
			want := append([]string{tc.cn}, tc.orgs...)
			got = append(got, cert.Subject.Organization...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("subject (-want +got):\n%s", diff)
			}
		})
	}

	// A second start keeps every key, so kubeconfigs and tokens handed out stay valid.
	before, err := os.ReadFile(l.serviceAccountKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ensurePKI("node-a"); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(l.serviceAccountKey())
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Error("service-account key changed on restart")
	}
}

func TestLayout_WriteConfigs_ValidDocuments(t *testing.T) {
	l := layout{dir: t.TempDir(), run: "/run/x"}
	for _, d := range l.dirs() {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.ensurePKI("n"); err != nil {
		t.Fatal(err)
	}
	if err := l.writeConfigs("n"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		want map[string]any
	}{
		{name: "kubelet keeps cgroup v1 working", path: l.kubeletConfig(), want: map[string]any{
			"kind": "KubeletConfiguration", "failCgroupV1": false, "cgroupDriver": "cgroupfs",
			"containerRuntimeEndpoint": "unix:///run/x/containerd.sock", "readOnlyPort": float64(0),
		}},
		{name: "kube-proxy leaves conntrack alone", path: l.kubeProxyConfig(), want: map[string]any{
			"kind": "KubeProxyConfiguration", "mode": "iptables", "clusterCIDR": PodCIDR,
		}},
		{name: "scheduler without leader election", path: l.schedulerConfig(), want: map[string]any{
			"kind": "KubeSchedulerConfiguration",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := yaml.UnmarshalStrict(data, &doc); err != nil {
				t.Fatalf("not YAML: %v", err)
			}
			got := map[string]any{}
			for k := range tc.want {
				got[k] = doc[k]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	var cni map[string]any
	data, err := os.ReadFile(l.cniConf())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cni); err != nil {
		t.Fatalf("CNI configuration is not JSON: %v", err)
	}
}

func TestUnescapeMount(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{name: "plain", in: "/var/lib/x", want: "/var/lib/x"},
		{name: "space", in: `/var/lib/a\040b`, want: "/var/lib/a b"},
		{name: "trailing backslash", in: `/a\`, want: `/a\`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unescapeMount(tc.in); got != tc.want {
				t.Errorf("unescapeMount(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
