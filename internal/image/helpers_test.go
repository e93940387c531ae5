package image

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// node is what the tests compare of a file or directory in an image's flattened filesystem.
type node struct {
	Dir      bool
	Mode     os.FileMode
	UID, GID int
	Content  string // files only
}

// testBuilder is a Builder with the Unix epoch and, unless caBundle is set, no CA bundle,
// so tests do not depend on the host's certificates.
func testBuilder(t *testing.T, caBundle string) *Builder {
	t.Helper()
	b := NewBuilder(t.TempDir(), time.Unix(0, 0))
	b.CABundle = caBundle
	return b
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func build(t *testing.T, b *Builder, s Spec) Image {
	t.Helper()
	img, err := b.Build(s)
	if err != nil {
		t.Fatalf("Build() = %v", err)
	}
	return img
}

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatalf("Digest() = %v", err)
	}
	return d
}

// readArchive unpacks an archive the way an importer sees it and opens it as a layout.
func readArchive(t *testing.T, archive string) (v1.ImageIndex, string) {
	t.Helper()
	dir := t.TempDir()
	if err := untar(archive, dir); err != nil {
		t.Fatalf("unpacking %s: %v", archive, err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("ImageIndexFromPath() = %v", err)
	}
	return idx, dir
}

// filesystem flattens img and returns every entry by absolute path; file contents are
// kept only for the paths in withContent.
func filesystem(t *testing.T, img v1.Image, withContent ...string) map[string]node {
	t.Helper()
	keep := map[string]bool{}
	for _, p := range withContent {
		keep[p] = true
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	nodes := map[string]node{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nodes
		}
		if err != nil {
			t.Fatalf("Extract(): %v", err)
		}
		p := "/" + filepath.Clean(hdr.Name)
		n := node{Dir: hdr.Typeflag == tar.TypeDir, Mode: hdr.FileInfo().Mode() &^ os.ModeDir, UID: hdr.Uid, GID: hdr.Gid}
		if keep[p] {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			n.Content = string(b)
		}
		nodes[p] = n
	}
}
