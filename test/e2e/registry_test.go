//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/stackwright/stackwright/internal/testing/cluster"
	"github.com/stackwright/stackwright/internal/testing/ociregistry"
)

// released is the part of dist/release/<version>/release.json the tests read.
type released struct {
	Version string `json:"version"`
	Manager struct {
		Ref, Digest string
		Platforms   []string
		SBOM        string
	} `json:"manager"`
	Runner struct {
		Ref, Digest string
		Platforms   []string
		SBOM        string
	} `json:"runner"`
	Chart        string `json:"chart"`
	ChartVersion string `json:"chartVersion"`
	Install      string `json:"install"`
}

// makeRelease runs `make release` as a user would, against registry, and reads what it
// pushed.
func makeRelease(t *testing.T, version, registry string) released {
	t.Helper()
	start := time.Now()
	run(t, "make", "-C", root, "release", "VERSION="+version, "REGISTRY="+registry, "PLAIN_HTTP=1")
	t.Logf("make release %s took %s", version, time.Since(start).Round(time.Second))
	b, err := os.ReadFile(filepath.Join(root, "dist", "release", version, "release.json"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var r released
	NewWithT(t).Expect(json.Unmarshal(b, &r)).To(Succeed())
	return r
}

// TestInstall_FromRegistry releases two versions to a real OCI registry (the distribution
// registry on the host's end of the node's veth), lets the node's containerd pull from it
// through a hosts.toml, as an organisation's mirror is configured, and installs the way
// the README tells users to: the release's install.yaml with kubectl, then the chart with
// helm from oci://, upgraded to the second version and rolled back. No image is imported
// by hand anywhere here: every Stackwright image the node runs is pulled from the registry
// by the digest the release pinned.
func TestInstall_FromRegistry(t *testing.T) {
	g := NewWithT(t)
	c := newClient(t)
	reg := ociregistry.Start(t, cluster.HostIP+":0", t.TempDir())
	g.Expect(cluster.DefaultOptions().TrustRegistry(reg.Host)).To(Succeed())
	registry := reg.Host + "/stackwright"
	v1 := makeRelease(t, "v0.1.0", registry)
	v2 := makeRelease(t, "v0.2.0", registry)
	g.Expect(v2.Manager.Digest).NotTo(Equal(v1.Manager.Digest), "two releases, one image")

	t.Run("IndexesListTwoPlatformsAndSBOMsTheModules", func(t *testing.T) {
		g := NewWithT(t)
		for _, ref := range []string{v1.Manager.Ref, v1.Runner.Ref} {
			r, err := name.ParseReference(ref, name.Insecure)
			g.Expect(err).NotTo(HaveOccurred())
			idx, err := remote.Index(r)
			g.Expect(err).NotTo(HaveOccurred(), ref)
			im, err := idx.IndexManifest()
			g.Expect(err).NotTo(HaveOccurred())
			var platforms []string
			for _, m := range im.Manifests {
				platforms = append(platforms, m.Platform.String())
			}
			g.Expect(platforms).To(ConsistOf("linux/amd64", "linux/arm64"), ref)
		}
		sbom, err := os.ReadFile(v1.Runner.SBOM)
		g.Expect(err).NotTo(HaveOccurred())
		for _, want := range []string{
			`"linux/arm64:/usr/local/bin/pulumi"`, `"linux/amd64:/usr/local/bin/stackwright"`,
			`"pkg:golang/github.com/pulumi/pulumi/pkg/v3@` + moduleVersion(t, "hack/tools/pulumi/go.mod", "github.com/pulumi/pulumi/pkg/v3") + `"`,
		} {
			g.Expect(string(sbom)).To(ContainSubstring(want))
		}
		g.Expect(string(sbom)).NotTo(ContainSubstring("stackwright-testing"), "the release ships test code")
	})

	t.Run("YAML", func(t *testing.T) {
		g := NewWithT(t)
		run(t, "kubectl", "apply", "--server-side", "-f", v1.Install)
		t.Cleanup(func() {
			if out, err := runErr("kubectl", "delete", "--ignore-not-found", "--wait", "-f", v1.Install); err != nil {
				t.Errorf("uninstall: %v\n%s", err, out)
			}
		})
		pod := waitManager(t, c)
		assertPulledFrom(g, pod, "manager", v1.Manager.Ref)
		const ns = "e2e-registry-yaml"
		createNamespace(t, c, ns)
		t.Cleanup(func() { deleteNamespace(t, c, ns) })
		s3 := startS3(t, c)
		applyOutputsStack(t, ns, s3.bucket(t, "registry-yaml", ""))
		g.Eventually(func(g Gomega) { waitStackReadyOnce(g, c, ns, "hello") }).
			WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
		assertRunnerPulledFrom(g, c, ns, v1.Runner.Ref)
		run(t, "kubectl", "delete", "-n", ns, "stack/hello", "--timeout=5m")
	})

	t.Run("HelmUpgradeAndRollback", func(t *testing.T) {
		g := NewWithT(t)
		helm := func(verb, version string) {
			run(t, "helm", verb, "stackwright", v1.Chart, "--version", version, "--plain-http",
				"-n", systemNamespace, "--wait", "--timeout=5m")
		}
		run(t, "helm", "install", "stackwright", v1.Chart, "--version", v1.ChartVersion, "--plain-http",
			"-n", systemNamespace, "--create-namespace", "--wait", "--timeout=5m")
		t.Cleanup(func() {
			if out, err := runErr("helm", "uninstall", "stackwright", "-n", systemNamespace, "--wait", "--timeout=5m"); err != nil {
				t.Errorf("helm uninstall: %v\n%s", err, out)
			}
			_, _ = runErr("kubectl", "delete", "namespace", systemNamespace, "--ignore-not-found", "--timeout=3m")
		})
		pod := waitManager(t, c)
		assertPulledFrom(g, pod, "manager", v1.Manager.Ref)
		const ns = "e2e-registry-helm"
		createNamespace(t, c, ns)
		t.Cleanup(func() { deleteNamespace(t, c, ns) })
		s3 := startS3(t, c)
		applyOutputsStack(t, ns, s3.bucket(t, "registry-helm", ""))
		g.Eventually(func(g Gomega) { waitStackReadyOnce(g, c, ns, "hello") }).
			WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
		assertRunnerPulledFrom(g, c, ns, v1.Runner.Ref)
		before := updates(g, c, ns)

		// Upgrade: the new manager pulls v0.2.0, the Stack stays Ready, nothing re-runs and
		// the history is kept.
		helm("upgrade", v2.ChartVersion)
		next := waitManager(t, c)
		g.Expect(next.Name).NotTo(Equal(pod.Name))
		assertPulledFrom(g, next, "manager", v2.Manager.Ref)
		g.Expect(next.Spec.Containers[0].Args).To(ContainElement("--runner-image=" + v2.Runner.Ref))
		assertSettled(t, c, ns, "hello", before)

		// Rollback to the first revision: v0.1.0 again, still nothing re-run.
		run(t, "helm", "rollback", "stackwright", "1", "-n", systemNamespace, "--wait", "--timeout=5m")
		back := waitManager(t, c)
		assertPulledFrom(g, back, "manager", v1.Manager.Ref)
		assertSettled(t, c, ns, "hello", before)
		run(t, "kubectl", "delete", "-n", ns, "stack/hello", "--timeout=5m")
	})
}

// applyOutputsStack applies a Stack "hello" whose inline Program has outputs and no
// resources: the release images carry no provider, so nothing else could run in them.
func applyOutputsStack(t *testing.T, ns, backend string) {
	t.Helper()
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, s3CredentialsYAML+`---
apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: hello
program:
  outputs:
    greeting: hello from a released image
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: hello
spec:
  stack: e2e
  programRef:
    name: hello
  backend: `+backend+`
  envRefs:
`+s3EnvRefsYAML))
}

// assertPulledFrom checks that container name of pod runs the image ref (repo@digest)
// and that the node pulled it by that digest.
func assertPulledFrom(g Gomega, pod *corev1.Pod, container, ref string) {
	repo, digest, _ := strings.Cut(ref, "@")
	var spec, status string
	for _, c := range pod.Spec.Containers {
		if c.Name == container {
			spec = c.Image
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container {
			status = cs.ImageID
		}
	}
	g.ExpectWithOffset(1, spec).To(Equal(ref), "Pod %s container %s", pod.Name, container)
	g.ExpectWithOffset(1, status).To(Equal(repo+"@"+digest), "Pod %s container %s was not pulled by the release's digest", pod.Name, container)
}

// assertRunnerPulledFrom checks the runner Pods of ns: there is one, and its image was
// pulled from the registry by the release's digest.
func assertRunnerPulledFrom(g Gomega, c client.Client, ns, ref string) {
	var pods corev1.PodList
	g.ExpectWithOffset(1, c.List(context.Background(), &pods, client.InNamespace(ns))).To(Succeed())
	found := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		for _, cs := range p.Spec.Containers {
			if cs.Name == "runner" {
				assertPulledFrom(g, p, "runner", ref)
				found++
			}
		}
	}
	g.ExpectWithOffset(1, found).To(BeNumerically(">", 0), "no runner Pod left in %s to check", ns)
}

// moduleVersion reads module's version from a go.mod of the repository.
func moduleVersion(t *testing.T, gomod, module string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, gomod))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("%s does not require %s", gomod, module)
	return ""
}
