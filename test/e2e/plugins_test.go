//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

// pluginServer is a plugin source as get.pulumi.com is one, inside the cluster's network:
// it serves plugin tarballs by file name and counts the requests and bytes of each.
type pluginServer struct {
	url   string
	files map[string][]byte
	mu    sync.Mutex
	asked map[string]int
	sent  map[string]int64
}

func startPluginServer(t *testing.T, files map[string][]byte) *pluginServer {
	t.Helper()
	s := &pluginServer{files: files, asked: map[string]int{}, sent: map[string]int64{}}
	l := listenOnNode(t)
	s.url = "http://" + l.Addr().String() + "/releases/plugins"
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		file := path.Base(r.URL.Path)
		s.mu.Lock()
		s.asked[file]++
		s.mu.Unlock()
		b, ok := s.files[file]
		if !ok {
			http.NotFound(w, r)
			return
		}
		n, _ := w.Write(b)
		s.mu.Lock()
		s.sent[file] += int64(n)
		s.mu.Unlock()
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *pluginServer) served(file string) (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[file], s.sent[file]
}

// providerVersion is the version the pinned Kubernetes provider reports (hack/tools.sh).
func providerVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "hack", "tools.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^k8s_provider_version=(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("hack/tools.sh names no k8s_provider_version")
	}
	return string(m[1])
}

// providerTarball packs the pinned Kubernetes provider as `pulumi plugin install` and the
// CLI's downloads expect it: the binary at the tarball's root.
func providerTarball(t *testing.T) []byte {
	t.Helper()
	bin, err := os.ReadFile(filepath.Join(root, "bin", "pulumi-resource-kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "pulumi-resource-kubernetes", Mode: 0o755, Size: int64(len(bin)), ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(bin); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// serviceProgram manages one Service through the Kubernetes provider at version.
func serviceProgram(version string, port int) string {
	return fmt.Sprintf(`name: downloads
runtime: yaml
config:
  namespace:
    type: string
resources:
  svc:
    type: kubernetes:core/v1:Service
    properties:
      metadata:
        name: downloaded
        namespace: ${namespace}
      spec:
        selector: {app: downloaded}
        ports:
        - port: %d
    options:
      version: %s
outputs:
  port: ${svc.spec.ports[0].port}
`, port, version)
}

// testPluginDownloads turns plugin downloads on (a plugin source in the cluster's network,
// no default bundle) and runs a program whose provider no bundle then gives it: the
// manager's plugin cache fetches the provider from the source once, for the first
// Update; the next Update fetches nothing from the source; a version the source does not
// have stalls its Stack with MissingPlugin. Run after testSeedNginx, in its namespace
// (the deployer ServiceAccount and its Role).
func testPluginDownloads(t *testing.T, c client.Client, ns, backend string) {
	ctx := context.Background()
	version := providerVersion(t)
	file := fmt.Sprintf("pulumi-resource-kubernetes-v%s-linux-%s.tar.gz", version, runtime.GOARCH)
	tarball := providerTarball(t)
	src := startPluginServer(t, map[string][]byte{file: tarball})
	patch := fmt.Sprintf(`[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--plugin-download-url=%s"},`+
		`{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--default-plugins="}]`, src.url)
	run(t, "kubectl", "patch", "-n", systemNamespace, "deployment/stackwright-manager", "--type=json", "-p", patch)
	run(t, "kubectl", "rollout", "status", "-n", systemNamespace, "deployment/stackwright-manager", "--timeout=5m")
	waitManager(t, c)

	repos := t.TempDir()
	repo, _ := gitserver.NewRepo(t, repos, "downloads", map[string]string{"Pulumi.yaml": serviceProgram(version, 80)})
	git := gitserver.NewHTTPServerOn(t, listenOnNode(t), repos, nil)
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, gitStackYAML("downloads", git.URL+"/downloads.git", ns, "deployer", backend, "")))
	port := func(want int) {
		t.Helper()
		NewWithT(t).Eventually(func(g Gomega) {
			st := waitStackReadyOnce(g, c, ns, "downloads")
			var got int
			g.Expect(json.Unmarshal(st.Status.Outputs["port"].Raw, &got)).To(Succeed())
			g.Expect(got).To(Equal(want))
		}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
	}
	port(80)
	asked, sent := src.served(file)
	NewWithT(t).Expect(asked).To(Equal(1), "the plugin source was asked once")
	NewWithT(t).Expect(sent).To(Equal(int64(len(tarball))), "the plugin source sent the provider once")
	t.Logf("first Update: the plugin source sent %d bytes (the provider's tarball)", sent)
	// The runner had no bundle: it downloaded the provider.
	var pods corev1.PodList
	NewWithT(t).Expect(c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.StackLabel: "downloads"})).To(Succeed())
	NewWithT(t).Expect(pods.Items).NotTo(BeEmpty())
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			NewWithT(t).Expect(v.Image).To(BeNil(), "runner Pod %s mounts a plugins image", p.Name)
		}
	}

	// A change: the second Update on the node fetches nothing from the source.
	repo.Commit(map[string]string{"Pulumi.yaml": serviceProgram(version, 8080)})
	port(8080)
	asked, sent = src.served(file)
	NewWithT(t).Expect(asked).To(Equal(1), "the second Update asked the plugin source again")
	NewWithT(t).Expect(sent).To(Equal(int64(len(tarball))))
	t.Logf("second Update: the plugin source sent 0 bytes more")

	// A version the source does not have: the Stack stalls at once, naming it.
	missing := serviceProgram("9.9.9", 80)
	gitserver.NewRepo(t, repos, "missing", map[string]string{"Pulumi.yaml": strings.Replace(missing, "name: downloaded", "name: not-downloaded", 1)})
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, gitStackYAML("missing", git.URL+"/missing.git", ns, "deployer", backend, "")))
	NewWithT(t).Eventually(func(g Gomega) {
		var st pulumiv1.Stack
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "missing"}, &st)).To(Succeed())
		cond := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(pulumiv1.ReasonMissingPlugin))
		g.Expect(cond.Message).To(ContainSubstring("the engine has no plugin pulumi-resource-kubernetes v9.9.9 and the install's plugin source does not have it either"))
		g.Expect(st.Status.LastUpdate).NotTo(BeNil())
		g.Expect(st.Status.LastUpdate.Name).To(HaveSuffix("-1"), "the failure was retried")
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))

	run(t, "kubectl", "delete", "-n", ns, "stack/downloads", "stack/missing", "--timeout=5m")
}
