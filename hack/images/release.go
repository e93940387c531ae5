package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/stackwright/stackwright/internal/image"
	"github.com/stackwright/stackwright/internal/manager"
	"github.com/stackwright/stackwright/internal/sbom"
)

// Release is what `images release` pushed, written to <out>/release.json.
type Release struct {
	Version  string `json:"version"`
	Registry string `json:"registry"`
	Revision string `json:"revision,omitempty"`
	// Manager, Runner and Plugins are the image indexes, by digest.
	Manager ReleasedImage `json:"manager"`
	Runner  ReleasedImage `json:"runner"`
	Plugins ReleasedImage `json:"plugins"`
	// Chart is the Helm chart's OCI reference (oci://…, without version) and version.
	Chart        string `json:"chart"`
	ChartVersion string `json:"chartVersion"`
	ChartDigest  string `json:"chartDigest,omitempty"`
	// Install is the install.yaml pinned to the digests, in the output directory.
	Install string `json:"install"`
}

// ReleasedImage is one pushed image index.
type ReleasedImage struct {
	// Ref is repository@digest; Tag repository:version.
	Ref        string   `json:"ref"`
	Tag        string   `json:"tag"`
	Digest     string   `json:"digest"`
	Platforms  []string `json:"platforms"`
	SBOM       string   `json:"sbom"`
	SBOMDigest string   `json:"sbomDigest"`
}

type releaseOptions struct {
	version, registry, revision, source, licenses string
	platforms                                     map[string]string // arch → bin dir
	chart, install, helm, out                     string
	plainHTTP                                     bool
}

// platformFlag collects --platform linux/<arch>=<bin dir>.
type platformFlag map[string]string

func (p platformFlag) String() string { return fmt.Sprint(map[string]string(p)) }
func (p platformFlag) Set(v string) error {
	plat, dir, ok := strings.Cut(v, "=")
	arch, found := strings.CutPrefix(plat, "linux/")
	if !ok || !found || dir == "" {
		return fmt.Errorf("want linux/<arch>=<directory of its static binaries>, got %q", v)
	}
	if _, ok := machines[arch]; !ok {
		return fmt.Errorf("no image architecture %q (want amd64 or arm64)", arch)
	}
	p[arch] = dir
	return nil
}

// semverTag is what a release version must look like: the chart's version is the same
// without the v, and Helm requires SemVer 2.
var semverTag = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)

func release(args []string) error {
	flags := flag.NewFlagSet("images release", flag.ContinueOnError)
	o := releaseOptions{platforms: map[string]string{}}
	flags.StringVar(&o.version, "version", "", "release version, vMAJOR.MINOR.PATCH[-PRERELEASE] (image tags and appVersion; the chart's version without the v)")
	flags.StringVar(&o.registry, "registry", "", "registry and path to push to: images go to <registry>/stackwright, <registry>/stackwright-runner and <registry>/stackwright-plugins, the chart to oci://<registry>/charts/stackwright")
	flags.StringVar(&o.revision, "revision", "", "source revision (commit) for the org.opencontainers.image.revision annotation")
	flags.StringVar(&o.source, "source", source, "source repository URL (org.opencontainers.image.source)")
	flags.StringVar(&o.licenses, "licenses", "", "SPDX license expression of the images (org.opencontainers.image.licenses and the SBOM); empty leaves both out")
	flags.Var(platformFlag(o.platforms), "platform", "linux/<arch>=<directory of that architecture's static binaries>; repeat for each platform of the images")
	flags.StringVar(&o.chart, "chart", "charts/stackwright", "Helm chart directory")
	flags.StringVar(&o.install, "install", "deploy/install.yaml", "install.yaml to pin to the pushed digests")
	flags.StringVar(&o.helm, "helm", "bin/helm", "helm binary (packages and pushes the chart)")
	flags.StringVar(&o.out, "out", "", "directory for the release's files (install.yaml, chart package, SBOMs, release.json); default dist/release/<version>")
	flags.BoolVar(&o.plainHTTP, "plain-http", false, "talk to the registry over plain HTTP (a test or in-cluster registry)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if !semverTag.MatchString(o.version) {
		return fmt.Errorf("--version %q: want vMAJOR.MINOR.PATCH[-PRERELEASE]", o.version)
	}
	if o.registry == "" || strings.Contains(o.registry, "://") || strings.HasSuffix(o.registry, "/") {
		return fmt.Errorf("--registry %q: want host[:port][/path], no scheme", o.registry)
	}
	if len(o.platforms) == 0 {
		return errors.New("no --platform given")
	}
	if o.out == "" {
		o.out = filepath.Join("dist", "release", o.version)
	}
	// Absolute, so that release.json's paths hold from any directory.
	out, err := filepath.Abs(o.out)
	if err != nil {
		return err
	}
	o.out = out
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	r, err := o.run(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("released %s to %s\n  manager %s (%s)\n  runner  %s (%s)\n  plugins %s (%s)\n  chart   %s --version %s\n  install %s\n",
		r.Version, r.Registry, r.Manager.Ref, strings.Join(r.Manager.Platforms, ", "), r.Runner.Ref,
		strings.Join(r.Runner.Platforms, ", "), r.Plugins.Ref, strings.Join(r.Plugins.Platforms, ", "), r.Chart, r.ChartVersion, r.Install)
	return nil
}

func (o releaseOptions) run(ctx context.Context) (*Release, error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	epoch, err := image.SourceDateEpoch()
	if err != nil {
		return nil, err
	}
	scratch, err := os.MkdirTemp(o.out, ".layers-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	b := image.NewBuilder(scratch, epoch)
	if _, err := os.Stat(b.CABundle); err != nil {
		// make images only warns; a released image without it would trust no TLS server
		// (S3, git over https, registries).
		return nil, fmt.Errorf("failed to find the CA bundle the images ship (%s): %w", b.CABundle, err)
	}
	opts := []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	var nameOpts []name.Option
	if o.plainHTTP {
		nameOpts = append(nameOpts, name.Insecure)
	}
	annotations := func(title, description string) map[string]string {
		a := labels(title, o.version, description)
		if o.licenses != "" {
			a["org.opencontainers.image.licenses"] = o.licenses
		}
		a["org.opencontainers.image.source"] = o.source
		a["org.opencontainers.image.created"] = epoch.Format(time.RFC3339)
		if o.revision != "" {
			a["org.opencontainers.image.revision"] = o.revision
		}
		return a
	}
	rel := &Release{Version: o.version, Registry: o.registry, Revision: o.revision}

	// The runner first: the manager's images name it by digest.
	push := func(title string, specFor func(arch string) (image.Spec, error)) (ReleasedImage, error) {
		repo := o.registry + "/" + title
		ref, err := name.NewTag(repo+":"+o.version, nameOpts...)
		if err != nil {
			return ReleasedImage{}, err
		}
		var images []image.Image
		var bins []sbom.Binary
		var platforms []string
		var description string
		for _, arch := range slices.Sorted(maps.Keys(o.platforms)) {
			s, err := specFor(arch)
			if err != nil {
				return ReleasedImage{}, err
			}
			s.Ref = ref.String()
			description = s.Labels["org.opencontainers.image.description"]
			s.Annotations = annotations(title, description)
			maps.Copy(s.Labels, s.Annotations)
			img, err := b.Build(s)
			if err != nil {
				return ReleasedImage{}, err
			}
			images = append(images, img)
			platforms = append(platforms, "linux/"+arch)
			for _, f := range append(slices.Clone(s.Lower), s.Files...) {
				bins = append(bins, sbom.Binary{File: f.Source, Path: f.Path, Platform: "linux/" + arch})
			}
		}
		idx, err := image.Index(images, annotations(title, description))
		if err != nil {
			return ReleasedImage{}, err
		}
		desc, err := image.PushIndex(ctx, ref, idx, opts...)
		if err != nil {
			return ReleasedImage{}, err
		}
		out := ReleasedImage{Ref: repo + "@" + desc.Digest.String(), Tag: ref.String(), Digest: desc.Digest.String(), Platforms: platforms}
		doc, err := sbomOf(sbom.Subject{Name: repo, Version: o.version, Digest: out.Digest, Source: o.source, Revision: o.revision, Licenses: o.licenses}, bins, epoch)
		if err != nil {
			return ReleasedImage{}, err
		}
		out.SBOM = filepath.Join(o.out, title+".cdx.json")
		if err := os.WriteFile(out.SBOM, doc, 0o644); err != nil {
			return ReleasedImage{}, err
		}
		sd, err := image.PushArtifact(ctx, ref.Tag(o.version+".sbom"), image.Artifact{
			ArtifactType: sbom.MediaType, Data: doc, Title: title + ".cdx.json", Subject: desc,
			Annotations: map[string]string{"org.opencontainers.image.created": epoch.Format(time.RFC3339)},
		}, opts...)
		if err != nil {
			return ReleasedImage{}, err
		}
		out.SBOMDigest = sd.String()
		return out, nil
	}
	rel.Runner, err = push("stackwright-runner", func(arch string) (image.Spec, error) {
		_, runner, err := productSpecs(o.platforms[arch], arch, o.version, o.registry, nil)
		return runner, err
	})
	if err != nil {
		return nil, err
	}
	rel.Plugins, err = push("stackwright-plugins", func(arch string) (image.Spec, error) {
		return pluginsSpec(o.platforms[arch], arch, o.version, o.registry)
	})
	if err != nil {
		return nil, err
	}
	rel.Manager, err = push("stackwright", func(arch string) (image.Spec, error) {
		// The manager's image names the runner and the plugins of the same release by digest.
		m, _, err := productSpecs(o.platforms[arch], arch, o.version, o.registry,
			[]string{manager.RunnerImageEnv + "=" + rel.Runner.Ref, pluginBundlesEnv(rel.Plugins.Ref)})
		return m, err
	})
	if err != nil {
		return nil, err
	}

	if err := o.releaseChart(ctx, rel); err != nil {
		return nil, err
	}
	rel.Install = filepath.Join(o.out, "install.yaml")
	in, err := os.ReadFile(o.install)
	if err != nil {
		return nil, err
	}
	pinned, err := pinInstall(in, rel.Manager.Ref, rel.Runner.Ref, o.version)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(rel.Install, pinned, 0o644); err != nil {
		return nil, err
	}
	j, err := json.MarshalIndent(rel, "", "  ")
	if err != nil {
		return nil, err
	}
	return rel, os.WriteFile(filepath.Join(o.out, "release.json"), append(j, '\n'), 0o644)
}

func sbomOf(subject sbom.Subject, bins []sbom.Binary, created time.Time) ([]byte, error) {
	bom, err := sbom.Build(subject, bins, created)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := sbom.Encode(&buf, bom); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// releaseChart packages a copy of the chart whose values name the release's images by
// digest, with the release's version and appVersion, and pushes it with helm.
func (o releaseOptions) releaseChart(ctx context.Context, rel *Release) error {
	dir, err := os.MkdirTemp(o.out, ".chart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	chartDir := filepath.Join(dir, "stackwright")
	if err := os.CopyFS(chartDir, os.DirFS(o.chart)); err != nil {
		return fmt.Errorf("failed to copy the chart: %w", err)
	}
	valuesPath := filepath.Join(chartDir, "values.yaml")
	values, err := os.ReadFile(valuesPath)
	if err != nil {
		return err
	}
	values, err = pinValues(values, o.registry, rel.Manager.Digest, rel.Runner.Digest)
	if err != nil {
		return err
	}
	if err := os.WriteFile(valuesPath, values, 0o644); err != nil {
		return err
	}
	rel.ChartVersion = strings.TrimPrefix(o.version, "v")
	pkgOut, err := o.helmRun(ctx, "package", chartDir, "--version", rel.ChartVersion, "--app-version", o.version, "--destination", o.out)
	if err != nil {
		return err
	}
	pkg := filepath.Join(o.out, "stackwright-"+rel.ChartVersion+".tgz")
	if _, err := os.Stat(pkg); err != nil {
		return fmt.Errorf("failed to find the chart package helm wrote (%s): %w", pkgOut, err)
	}
	args := []string{"push", pkg, "oci://" + o.registry + "/charts"}
	if o.plainHTTP {
		args = append(args, "--plain-http")
	}
	pushOut, err := o.helmRun(ctx, args...)
	if err != nil {
		return err
	}
	rel.Chart = "oci://" + o.registry + "/charts/stackwright"
	if m := regexp.MustCompile(`Digest: (sha256:[0-9a-f]{64})`).FindStringSubmatch(pushOut); m != nil {
		rel.ChartDigest = m[1]
	}
	return nil
}

func (o releaseOptions) helmRun(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, o.helm, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("failed to run helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// pinValues sets the chart's image repositories to the registry's and their digests to the
// release's. It edits the two blocks' lines in place, keeping every comment, and fails if
// values.yaml no longer has them as expected.
func pinValues(values []byte, registry, managerDigest, runnerDigest string) ([]byte, error) {
	edits := []struct{ line, value string }{
		{`  repository: localhost/stackwright`, "  repository: " + registry + "/stackwright"},
		{`  digest: ""`, `  digest: "` + managerDigest + `"`},
		{`    repository: localhost/stackwright-runner`, "    repository: " + registry + "/stackwright-runner"},
		{`    digest: ""`, `    digest: "` + runnerDigest + `"`},
	}
	for _, e := range edits {
		// Whole lines: the runner's indented keys must not match the manager's.
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(e.line) + `$`)
		if n := len(re.FindAllIndex(values, -1)); n != 1 {
			return nil, fmt.Errorf("failed to pin the chart's values: %q found %d times, want once", strings.TrimSpace(e.line), n)
		}
		values = re.ReplaceAllLiteral(values, []byte(e.value))
	}
	var check map[string]any
	if err := yaml.Unmarshal(values, &check); err != nil {
		return nil, fmt.Errorf("failed to pin the chart's values: the result does not parse: %w", err)
	}
	return values, nil
}

// pinInstall points install.yaml's manager Deployment at the release: its image by digest
// and --runner-image by digest. Only that document is rewritten; the others are kept byte
// for byte.
func pinInstall(in []byte, managerRef, runnerRef, version string) ([]byte, error) {
	docs := bytes.Split(in, []byte("\n---\n"))
	found := 0
	for i, doc := range docs {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil || head.Kind != "Deployment" {
			continue
		}
		var d map[string]any
		if err := yaml.Unmarshal(doc, &d); err != nil {
			return nil, fmt.Errorf("failed to read Deployment %s: %w", head.Metadata.Name, err)
		}
		containers, ok, err := unstructured.NestedSlice(d, "spec", "template", "spec", "containers")
		if err != nil {
			return nil, fmt.Errorf("failed to read Deployment %s's containers: %w", head.Metadata.Name, err)
		}
		if !ok {
			return nil, fmt.Errorf("failed to pin install.yaml: Deployment %s has no containers", head.Metadata.Name)
		}
		for _, c := range containers {
			cm, ok := c.(map[string]any)
			if !ok || cm["name"] != "manager" {
				continue
			}
			cm["image"] = managerRef
			args, _ := cm["args"].([]any)
			kept := args[:0]
			for _, a := range args {
				if s, _ := a.(string); strings.HasPrefix(s, "--runner-image=") {
					continue
				}
				kept = append(kept, a)
			}
			cm["args"] = append(kept, "--runner-image="+runnerRef)
			found++
		}
		// NestedSlice returned a copy: put the edited containers back.
		if err := unstructured.SetNestedSlice(d, containers, "spec", "template", "spec", "containers"); err != nil {
			return nil, fmt.Errorf("failed to write Deployment %s's containers: %w", head.Metadata.Name, err)
		}
		out, err := yaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		docs[i] = bytes.TrimSuffix(out, []byte("\n"))
	}
	if found != 1 {
		return nil, fmt.Errorf("failed to pin install.yaml: %d manager containers found, want 1", found)
	}
	header := fmt.Sprintf("# Stackwright %s: CRDs, RBAC and the manager, images pinned by digest. Written by `make release`.\n", version)
	return append([]byte(header), bytes.Join(docs, []byte("\n---\n"))...), nil
}
