package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/stackwright/stackwright/internal/testing/ociregistry"
)

// A platform team's bundle from what `pulumi plugin install` wrote: the plugins and their
// files go in at the same paths, the CLI's bookkeeping and an unfinished install stay out.
func TestPushPlugins_InstalledPlugins_PushedAsABundle(t *testing.T) {
	reg := ociregistry.Start(t, "127.0.0.1:0", t.TempDir())
	static, err := os.ReadFile(filepath.Join(standIns(t, runtime.GOARCH), "pause"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for path, data := range map[string][]byte{
		"resource-aws-v6.1.0/pulumi-resource-aws":   static,
		"resource-aws-v6.1.0/PulumiPlugin.yaml":     []byte("runtime: go\n"),
		"resource-aws-v6.1.0.lock":                  nil,
		"resource-half-v1.0.0/pulumi-resource-half": static,
		"resource-half-v1.0.0.partial":              nil,
		"pulumi-resource-flat":                      static,
	} {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := name.ParseReference(reg.Host+"/platform/plugins:aws-6", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := pushPlugins(t.Context(), dir, t.TempDir(), ref, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref.Context().Digest(digest))
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]int64{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && (strings.HasPrefix(h.Name, "resource-") || strings.HasPrefix(h.Name, "pulumi-")) {
			modes[h.Name] = h.Mode
		}
	}
	want := map[string]int64{
		"resource-aws-v6.1.0/pulumi-resource-aws": 0o755,
		"resource-aws-v6.1.0/PulumiPlugin.yaml":   0o644,
		"pulumi-resource-flat":                    0o755,
	}
	if diff := cmp.Diff(want, modes); diff != "" {
		t.Errorf("files of the bundle (-want +got):\n%s", diff)
	}
}

func TestPluginFiles_NotStaticOrNoPlugin_Refused(t *testing.T) {
	dynamic := t.TempDir()
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh to stand for a dynamically linked plugin")
	}
	if err := os.WriteFile(filepath.Join(dynamic, "pulumi-resource-dyn"), sh, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := pluginFiles(dynamic, runtime.GOARCH); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("a dynamically linked plugin: error %v; want it refused as dynamically linked", err)
	}
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "README"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pluginFiles(empty, runtime.GOARCH); err == nil || !strings.Contains(err.Error(), "no plugin") {
		t.Errorf("a directory without plugins: error %v; want it refused", err)
	}
}
