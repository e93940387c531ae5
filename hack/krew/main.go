package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	pluginName = "stackwright"
	binaryName = "kubectl-" + pluginName
	homepage   = "https://github.com/stackwright/stackwright"
	// releases is where `make krew`'s archives are published, one directory per version.
	releases = homepage + "/releases/download"
)

// build is one platform's binary: "linux/amd64=path/to/kubectl-stackwright".
type build struct {
	os, arch, path string
}

func parseBuild(arg string) (build, error) {
	platform, path, ok := strings.Cut(arg, "=")
	goos, goarch, ok2 := strings.Cut(platform, "/")
	if !ok || !ok2 || goos == "" || goarch == "" || path == "" {
		return build{}, fmt.Errorf("invalid build %q: want os/arch=path", arg)
	}
	return build{os: goos, arch: goarch, path: path}, nil
}

func main() {
	out := flag.String("out", "dist/krew", "directory to write the archives and the manifest to")
	version := flag.String("version", "", "release version (semver with a leading v)")
	baseURL := flag.String("url", "", "URL the archives are published under (default "+releases+"/<version>)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: krew [flags] os/arch=binary...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*out, *version, *baseURL, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(out, version, baseURL string, args []string) error {
	if !strings.HasPrefix(version, "v") || strings.Count(version, ".") < 2 {
		return fmt.Errorf("invalid version %q: want semver with a leading v, like v0.1.0", version)
	}
	if len(args) == 0 {
		return errors.New("no binaries given: want os/arch=path arguments")
	}
	if baseURL == "" {
		baseURL = releases + "/" + version
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", out, err)
	}
	var platforms []platform
	for _, arg := range args {
		b, err := parseBuild(arg)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("%s_%s_%s.tar.gz", binaryName, b.os, b.arch)
		sum, err := pack(b, filepath.Join(out, name))
		if err != nil {
			return err
		}
		bin := binaryName
		if b.os == "windows" {
			bin += ".exe"
		}
		platforms = append(platforms, platform{
			Selector: selector{MatchLabels: map[string]string{"os": b.os, "arch": b.arch}},
			URI:      strings.TrimSuffix(baseURL, "/") + "/" + name,
			SHA256:   sum,
			Bin:      bin,
			Files:    []fileOp{{From: bin, To: "."}},
		})
	}
	m, err := yaml.Marshal(manifest(version, platforms))
	if err != nil {
		return fmt.Errorf("failed to render the manifest: %w", err)
	}
	path := filepath.Join(out, pluginName+".yaml")
	if err := os.WriteFile(path, m, 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	return nil
}

// pack writes b's binary into a gzipped tar at path, with fixed metadata so that the
// archive depends only on the binary, and returns the archive's sha256.
func pack(b build, path string) (string, error) {
	bin, err := os.ReadFile(b.path)
	if err != nil {
		return "", fmt.Errorf("failed to read %s binary: %w", b.os+"/"+b.arch, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("failed to create %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(f, h)) // no name, no mtime: reproducible
	tw := tar.NewWriter(gz)
	name := binaryName
	if b.os == "windows" {
		name += ".exe"
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return "", fmt.Errorf("failed to write %s: %w", path, err)
	}
	if _, err := tw.Write(bin); err != nil {
		return "", fmt.Errorf("failed to write %s: %w", path, err)
	}
	if err := errors.Join(tw.Close(), gz.Close(), f.Close()); err != nil {
		return "", fmt.Errorf("failed to write %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// The krew plugin manifest (krew.googlecontainertools.github.com/v1alpha2 Plugin).
type plugin struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   metadata   `json:"metadata"`
	Spec       pluginSpec `json:"spec"`
}

type metadata struct {
	Name string `json:"name"`
}

type pluginSpec struct {
	Version          string     `json:"version"`
	Homepage         string     `json:"homepage"`
	ShortDescription string     `json:"shortDescription"`
	Description      string     `json:"description"`
	Platforms        []platform `json:"platforms"`
}

type platform struct {
	Selector selector `json:"selector"`
	URI      string   `json:"uri"`
	SHA256   string   `json:"sha256"`
	Bin      string   `json:"bin"`
	Files    []fileOp `json:"files"`
}

type selector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

type fileOp struct {
	From string `json:"from"`
	To   string `json:"to"`
}

func manifest(version string, platforms []platform) plugin {
	return plugin{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2",
		Kind:       "Plugin",
		Metadata:   metadata{Name: pluginName},
		Spec: pluginSpec{
			Version:          version,
			Homepage:         homepage,
			ShortDescription: "Work with Stackwright (Pulumi) Stacks and their Updates",
			Description: "Lists Stacks with their state, deployed revision and last update; shows a Stack's\n" +
				"history of Updates, an Update's engine output and a Stack's outputs; retries,\n" +
				"suspends and resumes Stacks. Uses your kubeconfig and your rights; never reads Secrets.\n",
			Platforms: platforms,
		},
	}
}
