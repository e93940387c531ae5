package main

import (
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"

	"github.com/stackwright/stackwright/internal/image"
	"github.com/stackwright/stackwright/internal/manager"
)

const (
	pauseRef = "registry.k8s.io/pause:3.10.1"
	// pauseUser matches the upstream pause image; the kubelet may run it as that uid.
	pauseUser   = "65535:65535"
	nonrootUser = "65532:65532"
	source      = "https://github.com/stackwright/stackwright"
	binDir      = "/usr/local/bin"
	dataDir     = "/var/lib/stackwright" // the manager's --data-dir default

	versitygwModule              = "github.com/versity/versitygw"
	sourceControllerModule       = "github.com/fluxcd/source-controller"
	notificationControllerModule = "github.com/fluxcd/notification-controller"
)

// What both product images ship: the operator, its reaper and lock remover (ownBinaries),
// and the engine and the YAML language host (engineBinaries; plugins are found on PATH, as
// none can be downloaded at run time). The engine changes only with its pinned version, so
// it has a layer of its own that a new release of the operator does not touch.
var (
	ownBinaries    = []string{"stackwright", "stackwright-reaper", "stackwright-unlock"}
	engineBinaries = []string{"pulumi", "pulumi-language-yaml"}
)

// pluginBinaries are the plugins image's: the Pulumi providers a release offers runner
// Pods as plugin bundles (mounted as image volumes, --plugin-bundle), each at the image's
// root, which is what the runner puts on the engine's PATH.
var pluginBinaries = []string{"pulumi-resource-kubernetes"}

// pluginsBundle is the bundle name under which a release's manager offers its plugins image.
const pluginsBundle = "kubernetes"

// testBinaries are added only to the testing image. The test provider has real side
// effects (files, ConfigMaps written with the token of whatever Pod runs it), so a release
// image that carried it would hand every tenant a ready-made tool.
var testBinaries = []string{"pulumi-resource-stackwright-testing"}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "release" || os.Args[1] == "plugins") {
		cmd := release
		if os.Args[1] == "plugins" {
			cmd = plugins
		}
		if err := cmd(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "Error:", err)
			os.Exit(1)
		}
		return
	}
	bin := flag.String("bin", "bin", "directory holding the static binaries")
	out := flag.String("out", "dist", "directory to write the image archives to")
	version := flag.String("version", "dev", "image tag and org.opencontainers.image.version")
	testing := flag.Bool("testing", false, "write only the testing image, stackwright-testing-<version>.tar as localhost/stackwright-testing:<version>: the release files and the test provider, for the end-to-end tests (as manager and runner image)")
	pause := flag.String("pause", "", "path of a static pause binary; when set, also writes pause.tar as "+pauseRef)
	servers := []testServer{
		{name: "versitygw", module: versitygwModule, description: "versitygw S3 gateway for Stackwright's end-to-end tests"},
		{name: "source-controller", module: sourceControllerModule, description: "Flux source-controller for Stackwright's end-to-end tests"},
		{name: "notification-controller", module: notificationControllerModule, description: "Flux notification-controller for Stackwright's end-to-end tests"},
	}
	for i := range servers {
		ts := &servers[i]
		flag.StringVar(&ts.path, ts.name, "", "path of a static "+ts.name+" binary; when set, also writes "+ts.name+".tar as localhost/"+ts.name+":<its module version> (a server the end-to-end tests run in the cluster)")
	}
	flag.Parse()
	if err := run(*bin, *out, *version, *testing, *pause, servers); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func run(bin, out, version string, testing bool, pause string, servers []testServer) error {
	epoch, err := image.SourceDateEpoch()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", out, err)
	}
	// Next to the output, not in /tmp: layers are hundreds of megabytes and /tmp may be
	// a small tmpfs.
	scratch, err := os.MkdirTemp(out, ".layers-")
	if err != nil {
		return fmt.Errorf("failed to create scratch directory: %w", err)
	}
	defer os.RemoveAll(scratch)
	b := image.NewBuilder(scratch, epoch)
	if _, err := os.Stat(b.CABundle); err != nil {
		fmt.Fprintf(os.Stderr, "warning: no CA bundle at %s; the images will trust no TLS server\n", b.CABundle)
	}

	plugins, err := pluginsSpec(bin, runtime.GOARCH, version, "localhost")
	if err != nil {
		return err
	}
	manager, runner, err := productSpecs(bin, runtime.GOARCH, version, "localhost", []string{pluginBundlesEnv(plugins.Ref)})
	if err != nil {
		return err
	}
	specs := []archive{
		{"stackwright-" + version + ".tar", manager}, {"stackwright-runner-" + version + ".tar", runner},
		{"stackwright-plugins-" + version + ".tar", plugins},
	}
	if testing {
		extra, err := binaryFiles(bin, runtime.GOARCH, testBinaries)
		if err != nil {
			return err
		}
		e2e := manager
		e2e.Ref = "localhost/stackwright-testing:" + version
		e2e.Files = append(slices.Clone(manager.Files), extra...)
		e2e.Labels = labels("stackwright-testing", version, "Stackwright with its test provider, for the end-to-end tests only: never deploy it")
		specs = []archive{{"stackwright-testing-" + version + ".tar", e2e}}
	}
	if pause != "" {
		if err := checkStatic(pause); err != nil {
			return err
		}
		specs = append(specs, archive{"pause.tar", image.Spec{
			Ref:        pauseRef,
			Files:      []image.File{{Source: pause, Path: "/pause", Mode: 0o755}},
			User:       pauseUser,
			Entrypoint: []string{"/pause"},
			Labels:     labels("pause", version, "Pod sandbox pause process, built from hack/pause"),
		}})
	}

	for _, ts := range servers {
		if ts.path == "" {
			continue
		}
		spec, err := ts.spec()
		if err != nil {
			return err
		}
		specs = append(specs, archive{ts.name + ".tar", spec})
	}

	for _, s := range specs {
		img, err := b.Build(s.spec)
		if err != nil {
			return err
		}
		a, err := image.WriteArchive(filepath.Join(out, s.file), img)
		if err != nil {
			return err
		}
		d, err := img.Digest()
		if err != nil {
			return fmt.Errorf("failed to hash %s: %w", img.Ref, err)
		}
		fmt.Printf("%s\t%s\tmanifest %s\tarchive %s\t%d bytes\n", a.Path, img.Ref, d, a.Digest, a.Size)
	}
	return nil
}

// archive is an image and the file in the output directory it is written to.
type archive struct {
	file string
	spec image.Spec
}

// productSpecs are the manager and runner images for arch from the binaries in bin, named
// repo/stackwright:version and repo/stackwright-runner:version; managerEnv is added to the
// manager's environment.
func productSpecs(bin, arch, version, repo string, managerEnv []string) (manager, runner image.Spec, err error) {
	own, err := binaryFiles(bin, arch, ownBinaries)
	if err != nil {
		return manager, runner, err
	}
	engine, err := binaryFiles(bin, arch, engineBinaries)
	if err != nil {
		return manager, runner, err
	}
	env := []string{
		"PATH=" + binDir,
		"HOME=/tmp",
		"PULUMI_SKIP_UPDATE_CHECK=true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true",
	}
	dirs := []image.Dir{{Path: dataDir, Mode: 0o755, UID: image.NonrootUID, GID: image.NonrootGID}}
	manager = image.Spec{
		Ref:        repo + "/stackwright:" + version,
		Arch:       arch,
		Lower:      engine,
		Files:      own,
		Dirs:       dirs,
		User:       nonrootUser,
		Env:        append(slices.Clone(env), managerEnv...),
		Entrypoint: []string{binDir + "/stackwright"},
		Cmd:        []string{"manager"},
		WorkingDir: "/tmp",
		Labels:     labels("stackwright", version, "Stackwright: a Kubernetes operator that reconciles Pulumi stacks"),
	}
	// No Cmd: the executor that starts runner Pods passes their arguments explicitly.
	runner = image.Spec{
		Ref:        repo + "/stackwright-runner:" + version,
		Arch:       arch,
		Lower:      engine,
		Files:      own,
		Dirs:       dirs,
		User:       nonrootUser,
		Env:        env,
		Entrypoint: []string{binDir + "/stackwright"},
		WorkingDir: "/tmp",
		Labels:     labels("stackwright-runner", version, "Stackwright runner: runs one Pulumi engine operation for a Stack"),
	}
	return manager, runner, nil
}

// pluginsSpec is the plugins image for arch, repo/stackwright-plugins:version: the
// providers of pluginBinaries at its root, owned by root and executable by anyone (a
// runner Pod's user is not root).
func pluginsSpec(bin, arch, version, repo string) (image.Spec, error) {
	var files []image.File
	for _, name := range pluginBinaries {
		src := filepath.Join(bin, name)
		if err := checkStaticFor(src, arch); err != nil {
			return image.Spec{}, err
		}
		files = append(files, image.File{Source: src, Path: "/" + name, Mode: 0o755})
	}
	return image.Spec{
		Ref:    repo + "/stackwright-plugins:" + version,
		Arch:   arch,
		Files:  files,
		User:   nonrootUser,
		Labels: labels("stackwright-plugins", version, "Pulumi plugins (the Kubernetes provider) that Stackwright mounts into runner Pods as an image volume"),
	}, nil
}

// pluginBundlesEnv is the manager image's default plugin bundle: the plugins image of
// the same build.
func pluginBundlesEnv(ref string) string {
	return manager.PluginBundlesEnv + "=" + pluginsBundle + "=" + ref
}

// binaryFiles places the named static binaries of bin, built for arch, in the images'
// binary directory.
func binaryFiles(bin, arch string, names []string) ([]image.File, error) {
	var files []image.File
	for _, name := range names {
		src := filepath.Join(bin, name)
		if err := checkStaticFor(src, arch); err != nil {
			return nil, err
		}
		files = append(files, image.File{Source: src, Path: binDir + "/" + name, Mode: 0o755})
	}
	return files, nil
}

// testServer is a third-party server the end-to-end tests run in the cluster, built from
// the Go module proxy by `make tools-cluster`.
type testServer struct {
	name, module, description string
	path                      string // of its static binary; "" skips it
}

// spec is the server's image. Its tag is the module version the binary was built from, so
// a test manifest and the binary cannot drift apart silently.
func (ts testServer) spec() (image.Spec, error) {
	if err := checkStatic(ts.path); err != nil {
		return image.Spec{}, err
	}
	info, err := buildinfo.ReadFile(ts.path)
	if err != nil {
		return image.Spec{}, fmt.Errorf("failed to read build info of %s: %w", ts.path, err)
	}
	version := ""
	for _, m := range append([]*debug.Module{&info.Main}, info.Deps...) {
		if m.Path == ts.module {
			version = m.Version
		}
	}
	if version == "" {
		return image.Spec{}, fmt.Errorf("failed to find the version of %s in %s: not built from that module", ts.module, ts.path)
	}
	return image.Spec{
		Ref:        "localhost/" + ts.name + ":" + version,
		Files:      []image.File{{Source: ts.path, Path: binDir + "/" + ts.name, Mode: 0o755}},
		User:       nonrootUser,
		Env:        []string{"HOME=/tmp"},
		Entrypoint: []string{binDir + "/" + ts.name},
		WorkingDir: "/",
		Labels:     labels(ts.name, version, ts.description),
	}, nil
}

func labels(title, version, description string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       title,
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.source":      source,
		"org.opencontainers.image.description": description,
	}
}

// checkStatic refuses binaries that cannot run in the images, which have no libc or dynamic
// loader: one linked dynamically (a build without CGO_ENABLED=0) would fail at exec with a
// baffling "no such file or directory". It also refuses other architectures, since the
// images are labelled with the architecture they are built for.
func checkStatic(path string) error { return checkStaticFor(path, runtime.GOARCH) }

// checkStaticFor is checkStatic for an image of architecture arch (a GOARCH).
func checkStaticFor(path, arch string) error {
	f, err := elf.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("failed to open %s: %w (run `make images`, which builds it)", path, err)
	}
	if err != nil {
		return fmt.Errorf("failed to read %s as an ELF binary: %w", path, err)
	}
	defer f.Close()
	want, ok := machines[arch]
	if !ok {
		return fmt.Errorf("failed to check %s: no image architecture %q (want one of amd64, arm64)", path, arch)
	}
	if f.Machine != want {
		return fmt.Errorf("failed to check %s: built for %v, want %v (GOARCH=%s)", path, f.Machine, want, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("failed to check %s: dynamically linked (it has an ELF interpreter); build it with CGO_ENABLED=0", path)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("failed to read %s's dynamic section: %w", path, err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("failed to check %s: dynamically linked against %v; build it with CGO_ENABLED=0", path, libs)
	}
	return nil
}

var machines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}
