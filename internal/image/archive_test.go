package image

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func TestWriteArchive_WriteArchive_IndexNamesEachImage(t *testing.T) {
	src := appSources(t)
	b := testBuilder(t, "")
	manager := appSpec(src)
	runner := appSpec(src)
	runner.Ref, runner.Cmd = "registry.example.com:5000/team/app-runner:v1.2.3-rc.1", nil
	images := []Image{build(t, b, manager), build(t, b, runner)}

	path := filepath.Join(t.TempDir(), "out", "app.tar")
	a, err := WriteArchive(path, images...)
	if err != nil {
		t.Fatalf("WriteArchive() = %v", err)
	}
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wantArchive := Archive{Path: path, Size: int64(len(content)), Digest: v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sha256.Sum256(content))}}
	if diff := cmp.Diff(wantArchive, a); diff != "" {
		t.Errorf("Archive (-want +got):\n%s", diff)
	}

	idx, dir := readArchive(t, path)
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	platform := &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	var want []v1.Descriptor
	for _, img := range images {
		m, err := img.RawManifest()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Size:      int64(len(m)),
			Digest:    digest(t, img),
			Platform:  platform,
			Annotations: map[string]string{
				"io.containerd.image.name":          img.Ref.String(),
				"org.opencontainers.image.ref.name": img.Ref.TagStr(),
			},
		})
	}
	if diff := cmp.Diff(want, im.Manifests); diff != "" {
		t.Errorf("index.json manifests (-want +got):\n%s", diff)
	}
	if got := []string{want[0].Annotations[AnnotationContainerdName], want[1].Annotations[AnnotationRefName]}; !cmp.Equal(got, []string{"localhost/app:v1.2.3", "v1.2.3-rc.1"}) {
		t.Errorf("annotations = %q; want the full reference and the bare tag", got)
	}

	// Each image reads back from the layout with its config and files intact.
	for i, img := range images {
		got, err := idx.Image(want[i].Digest)
		if err != nil {
			t.Fatalf("Image(%s) = %v", want[i].Digest, err)
		}
		gotCfg, err := got.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		wantCfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantCfg, gotCfg); diff != "" {
			t.Errorf("%s config (-want +got):\n%s", img.Ref, diff)
		}
		if diff := cmp.Diff(filesystem(t, img, "/usr/local/bin/app"), filesystem(t, got, "/usr/local/bin/app")); diff != "" {
			t.Errorf("%s filesystem (-built +read back):\n%s", img.Ref, diff)
		}
	}

	// Blobs the images share (both layers) are stored once: 2 manifests, 2 configs, 2 layers.
	blobs, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	if len(blobs) != 6 {
		t.Errorf("archive holds %d blobs; want 6", len(blobs))
	}
	if layout, err := os.ReadFile(filepath.Join(dir, "oci-layout")); err != nil || string(layout) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q, %v", layout, err)
	}
}

func TestWriteArchive_WriteArchive_Deterministic(t *testing.T) {
	src := appSources(t)
	write := func(t *testing.T, s Spec) Archive {
		t.Helper()
		a, err := WriteArchive(filepath.Join(t.TempDir(), "app.tar"), build(t, testBuilder(t, ""), s))
		if err != nil {
			t.Fatalf("WriteArchive() = %v", err)
		}
		return a
	}
	first := write(t, appSpec(src))
	tests := []struct {
		name   string
		change func(s *Spec)
		same   bool
	}{
		{name: "same inputs", change: func(*Spec) {}, same: true},
		{name: "another tag", change: func(s *Spec) { s.Ref = "localhost/app:v1.2.4" }},
		{name: "a file changed", change: func(s *Spec) { s.Files[2].Source = writeFile(t, t.TempDir(), "notes", "bye") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := appSpec(src)
			tt.change(&s)
			if got := write(t, s); (got.Digest == first.Digest) != tt.same {
				t.Errorf("archive digest = %s, first = %s; want same=%v", got.Digest, first.Digest, tt.same)
			}
		})
	}
}

func TestWriteArchive_WriteArchive_Errors(t *testing.T) {
	src := appSources(t)
	img := build(t, testBuilder(t, ""), appSpec(src))
	tests := []struct {
		name   string
		images []Image
		want   string
	}{
		{name: "no images", want: "no images"},
		{name: "same reference twice", images: []Image{img, img}, want: "image localhost/app:v1.2.3 listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "app.tar")
			_, err := WriteArchive(path, tt.images...)
			if err == nil || !strings.Contains(err.Error(), "failed to write image archive "+path+": "+tt.want) {
				t.Fatalf("WriteArchive() = %v; want an error containing %q", err, tt.want)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("WriteArchive left %d files behind", len(left))
			}
		})
	}
}

func TestContainerdName_DockerHub_AsTheKubeletAsksForIt(t *testing.T) {
	for _, tc := range []struct {
		reason, ref, want string
	}{
		{"docker.io is written as containerd names it", "docker.io/pulumi/pulumi:3.202.0-nonroot", "docker.io/pulumi/pulumi:3.202.0-nonroot"},
		{"index.docker.io is Docker Hub too", "index.docker.io/pulumi/pulumi:3.202.0", "docker.io/pulumi/pulumi:3.202.0"},
		{"official images keep library/", "docker.io/library/busybox:1", "docker.io/library/busybox:1"},
		{"other registries are left alone", "localhost/stackwright:v0.1.0", "localhost/stackwright:v0.1.0"},
		{"registries with ports are left alone", "registry.local:5000/team/app:v2", "registry.local:5000/team/app:v2"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			ref, err := name.NewTag(tc.ref, name.StrictValidation)
			if err != nil {
				t.Fatal(err)
			}
			if got := containerdName(ref); got != tc.want {
				t.Errorf("containerdName(%s) = %s, want %s", tc.ref, got, tc.want)
			}
		})
	}
}
