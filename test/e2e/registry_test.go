//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/testing/cluster"
	"github.com/stackwright/stackwright/internal/testing/ociregistry"
)

// released is the part of dist/release/<version>/release.json the tests read.
type released struct {
	Version      string        `json:"version"`
	Manager      releasedImage `json:"manager"`
	Runner       releasedImage `json:"runner"`
	Plugins      releasedImage `json:"plugins"`
	Chart        string        `json:"chart"`
	ChartVersion string        `json:"chartVersion"`
	Install      string        `json:"install"`
}

// releasedImage is one pushed image index of release.json.
type releasedImage struct {
	Ref, Digest string
	Platforms   []string
	SBOM        string
}

// makeRelease runs `make release` as a user would, against registry, at the given
// SOURCE_DATE_EPOCH, and reads what it pushed. `make e2e` cross-compiled the binaries
// already (release-binaries), so this builds, pushes and packages only.
func makeRelease(t *testing.T, version, registry string, epoch int) released {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "release", "VERSION="+version, "REGISTRY="+registry, "PLAIN_HTTP=1")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), fmt.Sprintf("SOURCE_DATE_EPOCH=%d", epoch))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release %s: %v\n%s", version, err, out)
	}
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
	// A day apart: the releases' times differ, as two real ones' would.
	r1 := makeRelease(t, "v0.1.0", registry, 1_800_000_000)
	r2 := makeRelease(t, "v0.2.0", registry, 1_800_086_400)
	g.Expect(r2.Manager.Digest).NotTo(Equal(r1.Manager.Digest), "two releases, one image")

	t.Run("TheSecondReleaseReusesTheEngineLayer", func(t *testing.T) {
		g := NewWithT(t)
		l1, l2 := layerDigests(g, r1.Runner.Ref), layerDigests(g, r2.Runner.Ref)
		g.Expect(l1).To(HaveLen(3), "base, engine, Stackwright")
		g.Expect(l2).To(HaveLen(3))
		g.Expect(l2[:2]).To(Equal(l1[:2]), "base and engine layers")
		g.Expect(l2[2]).NotTo(Equal(l1[2]), "Stackwright's own layer")
	})

	t.Run("IndexesListTwoPlatformsAndSBOMsTheModules", func(t *testing.T) {
		g := NewWithT(t)
		for _, ref := range []string{r1.Manager.Ref, r1.Runner.Ref, r1.Plugins.Ref} {
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
		// The SBOM is in the registry, referring to the index (distribution v3.1.2 has no
		// referrers API: this reads the fallback tag the release updated).
		r, err := name.ParseReference(r1.Runner.Ref, name.Insecure)
		g.Expect(err).NotTo(HaveOccurred())
		refs, err := remote.Referrers(r.Context().Digest(r1.Runner.Digest))
		g.Expect(err).NotTo(HaveOccurred())
		rm, err := refs.IndexManifest()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rm.Manifests).To(HaveLen(1))
		g.Expect(rm.Manifests[0].ArtifactType).To(Equal("application/vnd.cyclonedx+json"))
		sbom, err := os.ReadFile(r1.Runner.SBOM)
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
		run(t, "kubectl", "apply", "--server-side", "-f", r1.Install)
		t.Cleanup(func() {
			if out, err := runErr("kubectl", "delete", "--ignore-not-found", "--wait", "-f", r1.Install); err != nil {
				t.Errorf("uninstall: %v\n%s", err, out)
			}
		})
		g := NewWithT(t)
		ns, s3 := deployFromRelease(t, c, r1, "e2e-registry-yaml")
		pod := managerPod(g, c)
		assertRestricted(t, pod)
		g.Expect(s3.objects(ns, ".pulumi/stacks")).NotTo(BeEmpty(), "no state in the S3 backend")
		// The seeds' in-cluster NGINX, with the Kubernetes provider of the release's
		// plugins image (no image here carries test code).
		testSeedNginx(t, c, ns, s3.bucket(t, ns, "seed"), r1.Plugins.Ref)
		// PKO's own example of a Kubernetes-provider program, on the same images.
		testPKONginx(t, c, ns, s3.bucket(t, ns, "pko-nginx"))

		// A new manager Pod takes over: nothing is re-applied.
		before := updates(g, c, ns)
		g.Expect(c.Delete(context.Background(), pod)).To(Succeed())
		next := waitManager(t, c)
		g.Expect(next.Name).NotTo(Equal(pod.Name))
		assertPulledFrom(g, next, "manager", r1.Manager.Ref)
		assertSettled(t, c, ns, "hello", before)
		run(t, "kubectl", "delete", "-n", ns, "stack/hello", "--timeout=5m")

		// Last, since it changes the manager's flags: downloads through the plugin cache.
		testPluginDownloads(t, c, ns, s3.bucket(t, ns, "downloads"))
	})

	t.Run("Pulumi", func(t *testing.T) {
		// docs/releases.md's program, run by the pinned CLI with the Kubernetes provider
		// against this cluster (the kubeconfig of the test's environment).
		dir := t.TempDir()
		NewWithT(t).Expect(os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(docsBlock(t, "releases.md", "pulumi-install")), 0o600)).To(Succeed())
		for _, d := range []string{"home", "state"} {
			NewWithT(t).Expect(os.Mkdir(filepath.Join(dir, d), 0o700)).To(Succeed())
		}
		pulumi := func(args ...string) string {
			t.Helper()
			cmd := exec.Command(filepath.Join(root, "bin", "pulumi"), append(args, "--non-interactive")...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PULUMI_HOME="+filepath.Join(dir, "home"), "PULUMI_BACKEND_URL=file://"+filepath.Join(dir, "state"),
				"PULUMI_CONFIG_PASSPHRASE=e2e-only")
			for k, v := range engine.BaseEnv() {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("pulumi %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		pulumi("stack", "init", "e2e")
		pulumi("config", "set", "installYAML", r1.Install)
		pulumi("up", "--yes", "--skip-preview")
		t.Cleanup(func() {
			out := pulumi("destroy", "--yes", "--skip-preview")
			t.Logf("pulumi destroy:\n%s", out)
			_, _ = runErr("kubectl", "delete", "namespace", systemNamespace, "--ignore-not-found", "--timeout=3m")
		})
		ns, _ := deployFromRelease(t, c, r1, "e2e-registry-pulumi")
		run(t, "kubectl", "delete", "-n", ns, "stack/hello", "--timeout=5m")
	})

	t.Run("HelmUpgradeAndRollback", func(t *testing.T) {
		g := NewWithT(t)
		run(t, "helm", "install", "stackwright", r1.Chart, "--version", r1.ChartVersion, "--plain-http",
			"-n", systemNamespace, "--create-namespace", "--wait", "--timeout=5m")
		t.Cleanup(func() {
			if out, err := runErr("helm", "uninstall", "stackwright", "-n", systemNamespace, "--wait", "--timeout=5m"); err != nil {
				t.Errorf("helm uninstall: %v\n%s", err, out)
			}
			_, _ = runErr("kubectl", "delete", "namespace", systemNamespace, "--ignore-not-found", "--timeout=3m")
		})
		ns, _ := deployFromRelease(t, c, r1, "e2e-registry-helm")
		pod := managerPod(g, c)
		before := updates(g, c, ns)

		// Upgrade: the new manager pulls v0.2.0, the Stack stays Ready, nothing re-runs and
		// the history is kept.
		run(t, "helm", "upgrade", "stackwright", r1.Chart, "--version", r2.ChartVersion, "--plain-http",
			"-n", systemNamespace, "--wait", "--timeout=5m")
		next := waitManager(t, c)
		g.Expect(next.Name).NotTo(Equal(pod.Name))
		assertPulledFrom(g, next, "manager", r2.Manager.Ref)
		g.Expect(next.Spec.Containers[0].Args).To(ContainElement("--runner-image=" + r2.Runner.Ref))
		assertSettled(t, c, ns, "hello", before)

		// Rollback to the first revision: v0.1.0 again, still nothing re-run.
		run(t, "helm", "rollback", "stackwright", "1", "-n", systemNamespace, "--wait", "--timeout=5m")
		back := waitManager(t, c)
		assertPulledFrom(g, back, "manager", r1.Manager.Ref)
		assertSettled(t, c, ns, "hello", before)
		run(t, "kubectl", "delete", "-n", ns, "stack/hello", "--timeout=5m")
	})
}

// deployFromRelease checks that the installed manager runs rel's image, then runs Stack
// "hello" to Ready in a new namespace ns (state in bucket ns of a new S3 server) through a
// runner Pod pulled by rel's runner digest, and returns ns and the S3 server.
func deployFromRelease(t *testing.T, c client.Client, rel released, ns string) (string, *s3Server) {
	t.Helper()
	g := NewWithT(t)
	assertPulledFrom(g, waitManager(t, c), "manager", rel.Manager.Ref)
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	s3 := startS3(t, c)
	applyOutputsStack(t, ns, s3.bucket(t, ns, ""))
	g.Eventually(func(g Gomega) { waitStackReadyOnce(g, c, ns, "hello") }).
		WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
	assertRunnerPulledFrom(g, c, ns, rel.Runner.Ref)
	return ns, s3
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

// layerDigests are the layers of ref's linux/amd64 image, bottom first.
func layerDigests(g Gomega, ref string) []string {
	r, err := name.ParseReference(ref, name.Insecure)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	img, err := remote.Image(r, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"}))
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	layers, err := img.Layers()
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var out []string
	for _, l := range layers {
		d, err := l.Digest()
		g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
		out = append(out, d.String())
	}
	return out
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
