package image

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestListFiles_Archive_EveryImagesFiles(t *testing.T) {
	src := appSources(t)
	b := NewBuilder(t.TempDir(), time.Unix(0, 0))
	b.CABundle = ""
	app := build(t, b, appSpec(src))
	other := appSpec(src)
	other.Ref = "localhost/other:v1"
	other.Files = other.Files[:1]
	small := build(t, b, other)
	path := filepath.Join(t.TempDir(), "images.tar")
	if _, err := WriteArchive(path, app, small); err != nil {
		t.Fatal(err)
	}

	got, err := ListFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got["localhost/app:v1.2.3"], "/usr/local/bin/helper") {
		t.Errorf("app lists %v, want /usr/local/bin/helper among them", got["localhost/app:v1.2.3"])
	}
	var bins []string
	for _, f := range got["localhost/other:v1"] {
		if filepath.Dir(f) == "/usr/local/bin" {
			bins = append(bins, f)
		}
	}
	if diff := cmp.Diff([]string{"/usr/local/bin/app"}, bins); diff != "" {
		t.Errorf("other's binaries (-want +got):\n%s", diff)
	}
}
