package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/stackwright/stackwright/internal/manager"
	"github.com/stackwright/stackwright/internal/sbom"
	"github.com/stackwright/stackwright/internal/testing/ociregistry"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// standIns builds hack/pause for arch and places it under every name the images ship: a
// static binary with build info, the right ELF machine and a few hundred kilobytes, so the
// release flow runs for real without cross-compiling the engine.
func standIns(t *testing.T, arch string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause")
	if err := repo.GoBuild(t.Context(), ".", "../pause", bin, "", "GOOS=linux", "GOARCH="+arch); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range slices.Concat(ownBinaries, engineBinaries, pluginBinaries) {
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRelease_Run_PushesIndexesSBOMsChartAndPinnedInstall(t *testing.T) {
	ctx := context.Background()
	reg := ociregistry.Start(t, "127.0.0.1:0", t.TempDir())
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	bin, _ := repo.Bin()
	if err := repo.RequireBinaries(bin, "helm"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HELM_CONFIG_HOME", t.TempDir())
	t.Setenv("HELM_CACHE_HOME", t.TempDir())
	t.Setenv("HELM_DATA_HOME", t.TempDir())
	t.Setenv("HELM_REGISTRY_CONFIG", filepath.Join(t.TempDir(), "registry.json"))
	o := releaseOptions{
		version: "v1.2.3-rc.1", registry: reg.Host + "/acme", revision: "0123abcd", source: source, licenses: "Apache-2.0",
		platforms: map[string]string{"amd64": standIns(t, "amd64"), "arm64": standIns(t, "arm64")},
		chart:     filepath.Join(root, "charts", "stackwright"), install: filepath.Join(root, "deploy", "install.yaml"),
		helm: filepath.Join(bin, "helm"), out: t.TempDir(), plainHTTP: true,
	}
	rel, err := o.run(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// release.json says what was pushed.
	var onDisk Release
	b, err := os.ReadFile(filepath.Join(o.out, "release.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &onDisk); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*rel, onDisk); diff != "" {
		t.Errorf("release.json (-returned +file):\n%s", diff)
	}

	// Each image is one index of two platforms; the manager names the runner and the
	// plugins bundle by digest.
	for _, img := range []ReleasedImage{rel.Manager, rel.Runner, rel.Plugins} {
		ref, err := name.ParseReference(img.Ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref)
		if err != nil {
			t.Fatalf("read %s: %v", img.Ref, err)
		}
		im, _ := idx.IndexManifest()
		var plats []string
		for _, m := range im.Manifests {
			plats = append(plats, m.Platform.String())
			pi, err := idx.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, _ := pi.ConfigFile()
			for _, env := range []string{manager.RunnerImageEnv + "=" + rel.Runner.Ref, manager.PluginBundlesEnv + "=kubernetes=" + rel.Plugins.Ref} {
				if got := slices.Contains(cf.Config.Env, env); got != (img.Ref == rel.Manager.Ref) {
					t.Errorf("%s %s: env %v; want %q only in the manager", img.Ref, m.Platform, cf.Config.Env, env)
				}
			}
			mf, _ := pi.Manifest()
			want := map[string]string{"org.opencontainers.image.version": "v1.2.3-rc.1", "org.opencontainers.image.revision": "0123abcd",
				"org.opencontainers.image.source": source, "org.opencontainers.image.licenses": "Apache-2.0"}
			for k, v := range want {
				if mf.Annotations[k] != v || cf.Config.Labels[k] != v {
					t.Errorf("%s %s: annotation/label %s = %q/%q, want %q", img.Ref, m.Platform, k, mf.Annotations[k], cf.Config.Labels[k], v)
				}
			}
		}
		if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, plats); diff != "" {
			t.Errorf("%s platforms (-want +got):\n%s", img.Ref, diff)
		}
		// The tag names the same index.
		tagged, err := remote.Head(must(name.ParseReference(img.Tag, name.Insecure)))
		if err != nil || tagged.Digest.String() != img.Digest {
			t.Errorf("%s points at %v (%v), want %s", img.Tag, tagged, err, img.Digest)
		}
		// The SBOM refers to the index and lists every binary of both platforms.
		refs, err := remote.Referrers(ref.Context().Digest(img.Digest))
		if err != nil {
			t.Fatal(err)
		}
		rm, _ := refs.IndexManifest()
		if len(rm.Manifests) != 1 || rm.Manifests[0].ArtifactType != sbom.MediaType || rm.Manifests[0].Digest.String() != img.SBOMDigest {
			t.Errorf("%s referrers = %+v, want its SBOM %s", img.Ref, rm.Manifests, img.SBOMDigest)
		}
		doc, err := os.ReadFile(img.SBOM)
		if err != nil {
			t.Fatal(err)
		}
		wantBins := []string{`"linux/amd64:/usr/local/bin/pulumi"`, `"linux/arm64:/usr/local/bin/stackwright"`}
		if img.Ref == rel.Plugins.Ref {
			wantBins = []string{`"linux/amd64:/pulumi-resource-kubernetes"`, `"linux/arm64:/pulumi-resource-kubernetes"`}
		}
		for _, want := range append(wantBins, img.Digest) {
			if !strings.Contains(string(doc), want) {
				t.Errorf("%s's SBOM does not mention %s", img.Ref, want)
			}
		}
	}

	// The chart in the registry installs the release's images by digest.
	show, err := exec.Command(o.helm, "show", "values", rel.Chart, "--version", rel.ChartVersion, "--plain-http").CombinedOutput()
	if err != nil {
		t.Fatalf("helm show values %s: %v\n%s", rel.Chart, err, show)
	}
	var values struct {
		Image struct {
			Repository, Digest string
		}
		Runner struct {
			Image struct{ Repository, Digest string }
		}
	}
	if err := yaml.Unmarshal(show, &values); err != nil {
		t.Fatal(err)
	}
	if got, want := values.Image.Repository+"@"+values.Image.Digest, rel.Manager.Ref; got != want {
		t.Errorf("chart manager image = %s, want %s", got, want)
	}
	if got, want := values.Runner.Image.Repository+"@"+values.Runner.Image.Digest, rel.Runner.Ref; got != want {
		t.Errorf("chart runner image = %s, want %s", got, want)
	}
	chart, err := exec.Command(o.helm, "show", "chart", rel.Chart, "--version", rel.ChartVersion, "--plain-http").CombinedOutput()
	if err != nil || !strings.Contains(string(chart), "appVersion: v1.2.3-rc.1") || !strings.Contains(string(chart), "version: 1.2.3-rc.1") {
		t.Errorf("helm show chart: %v\n%s", err, chart)
	}

	// install.yaml: the manager Deployment runs both images by digest.
	install, err := os.ReadFile(rel.Install)
	if err != nil {
		t.Fatal(err)
	}
	var dep *appsv1.Deployment
	for doc := range strings.SplitSeq(string(install), "\n---\n") {
		var d appsv1.Deployment
		if yaml.Unmarshal([]byte(doc), &d) == nil && d.Kind == "Deployment" {
			dep = &d
		}
	}
	if dep == nil {
		t.Fatal("no Deployment in the pinned install.yaml")
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.Image != rel.Manager.Ref || !slices.Contains(c.Args, "--runner-image="+rel.Runner.Ref) {
		t.Errorf("install.yaml manager: image %s, args %v; want %s and --runner-image=%s", c.Image, c.Args, rel.Manager.Ref, rel.Runner.Ref)
	}
	if strings.Contains(string(install), "localhost/stackwright") {
		t.Error("the pinned install.yaml still names a localhost image")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestPinValues_RefusesAChartItDoesNotRecognise(t *testing.T) {
	_, err := pinValues([]byte("image:\n  repository: other/stackwright\n"), "r", "sha256:a", "sha256:b")
	if err == nil || !strings.Contains(err.Error(), "found 0 times") {
		t.Errorf("err = %v, want a refusal naming the line it did not find", err)
	}
}

// pinInstall rewrites the manager Deployment only: every other document of install.yaml is
// kept byte for byte, and the Deployment differs only in image, arguments and nothing else.
func TestPinInstall_ChangesOnlyTheManagersImages(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.ReadFile(filepath.Join(root, "deploy", "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const mgr, runner = "r.example/sw/stackwright@sha256:aa", "r.example/sw/stackwright-runner@sha256:bb"
	out, err := pinInstall(in, mgr, runner, "v9.9.9")
	if err != nil {
		t.Fatal(err)
	}
	split := func(b []byte) []string { return strings.Split(string(b), "\n---\n") }
	before, after := split(in), split(out)
	if len(before) != len(after) {
		t.Fatalf("%d documents in, %d out", len(before), len(after))
	}
	deployments := 0
	for i := range before {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(before[i]), &head); err != nil || head.Kind != "Deployment" {
			want := before[i]
			if i == 0 {
				// The header comment names the release instead of the generator.
				want = want[strings.Index(want, "\napiVersion:")+1:]
				if got := after[0][strings.Index(after[0], "\napiVersion:")+1:]; got != want {
					t.Errorf("document 0 changed")
				}
				continue
			}
			if after[i] != want {
				t.Errorf("document %d (%s) changed", i, head.Kind)
			}
			continue
		}
		deployments++
		var was, is appsv1.Deployment
		if err := yaml.Unmarshal([]byte(before[i]), &was); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(after[i]), &is); err != nil {
			t.Fatal(err)
		}
		c := &was.Spec.Template.Spec.Containers[0]
		c.Image = mgr
		c.Args = append(slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--runner-image=") }), "--runner-image="+runner)
		if diff := cmp.Diff(was, is); diff != "" {
			t.Errorf("the Deployment changed beyond its images (-want +got):\n%s", diff)
		}
	}
	if deployments != 1 {
		t.Errorf("%d Deployments, want the manager's", deployments)
	}
}
