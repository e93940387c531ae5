package image

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/stackwright/stackwright/internal/testing/ociregistry"
)

// The distribution registry, not a look-alike: what it accepts is what users' registries
// built on it accept.
func TestPushIndex_TwoPlatformsAndAnArtifactThatRefersToThem(t *testing.T) {
	ctx := context.Background()
	reg := ociregistry.Start(t, "127.0.0.1:0", t.TempDir())
	src := appSources(t)
	b := testBuilder(t, "")
	var images []Image
	for _, arch := range []string{"amd64", "arm64"} {
		s := appSpec(src)
		s.Arch = arch
		s.Lower = []File{{Source: filepath.Join(src, "notes"), Path: "/usr/local/lib/engine.txt"}}
		s.Annotations = map[string]string{"org.opencontainers.image.version": "v1.2.3"}
		images = append(images, build(t, b, s))
	}
	idx, err := Index(images, map[string]string{"org.opencontainers.image.revision": "abc123"})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(reg.Host + "/acme/app:v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	desc, err := PushIndex(ctx, ref, idx)
	if err != nil {
		t.Fatal(err)
	}

	got, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("read the pushed index back: %v", err)
	}
	if d, _ := got.Digest(); d != desc.Digest {
		t.Errorf("index digest = %s, pushed %s", d, desc.Digest)
	}
	im, err := got.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, m := range im.Manifests {
		platforms = append(platforms, m.Platform.String())
		img, err := got.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != m.Platform.Architecture {
			t.Errorf("the %s entry's image is for %s", m.Platform, cf.Architecture)
		}
		layers, _ := img.Layers()
		if len(layers) != 3 {
			t.Errorf("the %s image has %d layers, want base, lower and files", m.Platform, len(layers))
		}
		mf, _ := img.Manifest()
		if mf.Annotations["org.opencontainers.image.version"] != "v1.2.3" {
			t.Errorf("the %s manifest's annotations = %v", m.Platform, mf.Annotations)
		}
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
	if im.Annotations["org.opencontainers.image.revision"] != "abc123" {
		t.Errorf("index annotations = %v", im.Annotations)
	}

	doc := []byte(`{"bomFormat":"CycloneDX"}`)
	sbomTag := ref.Tag("v1.2.3.sbom")
	artDigest, err := PushArtifact(ctx, sbomTag, Artifact{
		ArtifactType: "application/vnd.cyclonedx+json", Data: doc, Title: "sbom.cdx.json", Subject: desc,
	})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := remote.Referrers(ref.Digest(desc.Digest.String()))
	if err != nil {
		t.Fatalf("list the index's referrers: %v", err)
	}
	rm, err := refs.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Manifests) != 1 || rm.Manifests[0].Digest != artDigest || rm.Manifests[0].ArtifactType != "application/vnd.cyclonedx+json" {
		t.Fatalf("referrers = %+v, want the SBOM %s", rm.Manifests, artDigest)
	}
	art, err := remote.Image(sbomTag)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := art.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("artifact layers = %d, %v", len(layers), err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	back, _ := io.ReadAll(rc)
	if string(back) != string(doc) {
		t.Errorf("artifact blob = %q, want %q", back, doc)
	}
}
