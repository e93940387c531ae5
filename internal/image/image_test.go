package image

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// appSpec is a small image shaped like the operator's: binaries, a data directory, a
// non-root user.
func appSpec(src string) Spec {
	return Spec{
		Ref: "localhost/app:v1.2.3",
		Files: []File{
			{Source: filepath.Join(src, "app"), Path: "/usr/local/bin/app", Mode: 0o755},
			{Source: filepath.Join(src, "helper"), Path: "/usr/local/bin/helper", Mode: 0o755},
			{Source: filepath.Join(src, "notes"), Path: "/usr/share/app/notes.txt"},
			{Source: filepath.Join(src, "notes"), Path: "/tmp/seed/notes.txt", Mode: 0o640},
		},
		Dirs: []Dir{
			{Path: "/var/lib/app", Mode: 0o750, UID: NonrootUID, GID: NonrootGID},
			{Path: "/usr/local", Mode: 0o755 | fs.ModeSetgid},
		},
		User:       "65532:65532",
		Env:        []string{"PATH=/usr/local/bin", "HOME=/tmp"},
		Entrypoint: []string{"/usr/local/bin/app"},
		Cmd:        []string{"serve"},
		WorkingDir: "/tmp",
		Labels: map[string]string{
			"org.opencontainers.image.title":   "app",
			"org.opencontainers.image.version": "v1.2.3",
		},
	}
}

func appSources(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	writeFile(t, src, "app", "#app binary")
	writeFile(t, src, "helper", "#helper binary")
	writeFile(t, src, "notes", "hello")
	return src
}

func TestBuilder_Build_Config(t *testing.T) {
	src := appSources(t)
	epoch := time.Unix(1700000000, 0)
	b := NewBuilder(t.TempDir(), epoch)
	b.CABundle = ""
	img := build(t, b, appSpec(src))

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want := &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: epoch.UTC()},
		Config: v1.Config{
			User:       "65532:65532",
			Env:        []string{"PATH=/usr/local/bin", "HOME=/tmp"},
			Entrypoint: []string{"/usr/local/bin/app"},
			Cmd:        []string{"serve"},
			WorkingDir: "/tmp",
			Labels: map[string]string{
				"org.opencontainers.image.title":   "app",
				"org.opencontainers.image.version": "v1.2.3",
			},
		},
	}
	got := &v1.ConfigFile{Architecture: cf.Architecture, OS: cf.OS, Created: cf.Created, Config: cf.Config}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if len(cf.RootFS.DiffIDs) != 2 || len(cf.History) != 2 {
		t.Errorf("config has %d diff IDs and %d history entries; want 2 and 2 (base, files)", len(cf.RootFS.DiffIDs), len(cf.History))
	}
	for _, h := range cf.History {
		if !h.Created.Equal(epoch) {
			t.Errorf("history %q created %v; want %v", h.CreatedBy, h.Created, epoch)
		}
	}

	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	gotTypes := []types.MediaType{m.MediaType, m.Config.MediaType}
	for _, l := range m.Layers {
		gotTypes = append(gotTypes, l.MediaType)
	}
	wantTypes := []types.MediaType{types.OCIManifestSchema1, types.OCIConfigJSON, types.OCILayer, types.OCILayer}
	if diff := cmp.Diff(wantTypes, gotTypes); diff != "" {
		t.Errorf("media types (-want +got):\n%s", diff)
	}
}

func TestBuilder_Build_Filesystem(t *testing.T) {
	src := appSources(t)
	ca := writeFile(t, t.TempDir(), "ca.crt", "-----BEGIN CERTIFICATE-----\n")
	img := build(t, testBuilder(t, ca), appSpec(src))
	fsys := filesystem(t, img, "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
		"/etc/ssl/certs/ca-certificates.crt", "/usr/local/bin/app", "/usr/share/app/notes.txt")

	root := func(mode fs.FileMode) node { return node{Dir: true, Mode: mode} }
	tests := []struct {
		path string
		want node
	}{
		// base layer
		{"/etc", root(0o755)},
		{"/etc/passwd", node{Mode: 0o644, Content: "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"}},
		{"/etc/group", node{Mode: 0o644, Content: "root:x:0:\nnonroot:x:65532:\n"}},
		{"/etc/nsswitch.conf", node{Mode: 0o644, Content: "hosts: files dns\n"}},
		{"/etc/ssl", root(0o755)},
		{"/etc/ssl/certs", root(0o755)},
		{"/etc/ssl/certs/ca-certificates.crt", node{Mode: 0o644, Content: "-----BEGIN CERTIFICATE-----\n"}},
		{"/home", root(0o755)},
		{"/home/nonroot", node{Dir: true, Mode: 0o755, UID: 65532, GID: 65532}},
		{"/root", root(0o700)},
		// the files layer repeats /tmp as the parent of /tmp/seed and must keep its sticky bit
		{"/tmp", root(fs.ModeSticky | 0o777)},
		{"/tmp/seed", root(0o755)},
		{"/tmp/seed/notes.txt", node{Mode: 0o640}},
		// files layer
		{"/usr", root(0o755)},
		{"/usr/local", root(fs.ModeSetgid | 0o755)},
		{"/usr/local/bin", root(0o755)},
		{"/usr/local/bin/app", node{Mode: 0o755, Content: "#app binary"}},
		{"/usr/local/bin/helper", node{Mode: 0o755}},
		{"/usr/share", root(0o755)},
		{"/usr/share/app", root(0o755)},
		{"/usr/share/app/notes.txt", node{Mode: 0o644, Content: "hello"}},
		{"/var", root(0o755)},
		{"/var/lib", root(0o755)},
		{"/var/lib/app", node{Dir: true, Mode: 0o750, UID: 65532, GID: 65532}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, ok := fsys[tt.path]
			if !ok {
				t.Fatalf("%s is not in the image", tt.path)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tt.path, diff)
			}
		})
	}
	var want, got []string
	for _, tt := range tests {
		want = append(want, tt.path)
	}
	for p := range fsys {
		got = append(got, p)
	}
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("paths in the image (-want +got):\n%s", diff)
	}
}

func TestBuilder_Build_CABundleOnlyWhenPresent(t *testing.T) {
	tests := []struct {
		name     string
		caBundle string
		want     bool
	}{
		{name: "present", caBundle: writeFile(t, t.TempDir(), "ca.crt", "certs"), want: true},
		{name: "missing on the host", caBundle: filepath.Join(t.TempDir(), "nope.crt")},
		{name: "disabled", caBundle: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := build(t, testBuilder(t, tt.caBundle), Spec{Ref: "localhost/ca:v1"})
			_, got := filesystem(t, img)["/etc/ssl/certs/ca-certificates.crt"]
			if got != tt.want {
				t.Errorf("CA bundle in image = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestBuilder_Build_Deterministic(t *testing.T) {
	src := appSources(t)
	want := digest(t, build(t, testBuilder(t, ""), appSpec(src)))

	tests := []struct {
		name   string
		change func(t *testing.T, b *Builder, s *Spec)
		same   bool
	}{
		{name: "same inputs, new builder", change: func(*testing.T, *Builder, *Spec) {}, same: true},
		{name: "same inputs, files listed in another order", same: true, change: func(_ *testing.T, _ *Builder, s *Spec) {
			s.Files[0], s.Files[1] = s.Files[1], s.Files[0]
		}},
		{name: "same content copied elsewhere", same: true, change: func(t *testing.T, _ *Builder, s *Spec) {
			other := t.TempDir()
			for i, f := range s.Files {
				b, err := os.ReadFile(f.Source)
				if err != nil {
					t.Fatal(err)
				}
				s.Files[i].Source = writeFile(t, other, filepath.Base(f.Source), string(b))
			}
		}},
		{name: "a file changed", change: func(t *testing.T, _ *Builder, s *Spec) {
			s.Files[0].Source = writeFile(t, t.TempDir(), "app", "#app binary, rebuilt")
		}},
		{name: "a mode changed", change: func(_ *testing.T, _ *Builder, s *Spec) { s.Files[2].Mode = 0o600 }},
		{name: "a label changed", change: func(_ *testing.T, _ *Builder, s *Spec) {
			s.Labels = map[string]string{"org.opencontainers.image.version": "v1.2.4"}
		}},
		{name: "another epoch", change: func(t *testing.T, b *Builder, _ *Spec) {
			*b = *NewBuilder(t.TempDir(), time.Unix(1, 0))
			b.CABundle = ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := testBuilder(t, "")
			s := appSpec(src)
			tt.change(t, b, &s)
			if got := digest(t, build(t, b, s)); (got == want) != tt.same {
				t.Errorf("digest = %s, first build's = %s; want same=%v", got, want, tt.same)
			}
		})
	}
}

// A release at another time keeps the layers of unchanged files: only the config (its
// creation time) differs.
func TestBuilder_Build_LayersDoNotDependOnTheEpoch(t *testing.T) {
	src := appSources(t)
	layersOf := func(epoch time.Time) []v1.Hash {
		b := NewBuilder(t.TempDir(), epoch)
		b.CABundle = ""
		img := build(t, b, appSpec(src))
		ls, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		var out []v1.Hash
		for _, l := range ls {
			d, err := l.Digest()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
		return out
	}
	if diff := cmp.Diff(layersOf(time.Unix(0, 0)), layersOf(time.Unix(1700000000, 0))); diff != "" {
		t.Errorf("layer digests differ between epochs (-0 +1700000000):\n%s", diff)
	}
}

func TestBuilder_Build_ReusesLayersOfEqualFiles(t *testing.T) {
	src := appSources(t)
	b := testBuilder(t, "")
	manager := appSpec(src)
	runner := appSpec(src)
	runner.Ref, runner.Cmd = "localhost/app-runner:v1.2.3", nil

	layers := func(img Image) []v1.Hash {
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		var ds []v1.Hash
		for _, l := range m.Layers {
			ds = append(ds, l.Digest)
		}
		return ds
	}
	if diff := cmp.Diff(layers(build(t, b, manager)), layers(build(t, b, runner))); diff != "" {
		t.Errorf("layers (-manager +runner):\n%s", diff)
	}
	scratch, err := os.ReadDir(b.scratch)
	if err != nil {
		t.Fatal(err)
	}
	if len(scratch) != 2 {
		t.Errorf("scratch holds %d layer files; want 2 (base and files, written once)", len(scratch))
	}
}

func TestBuilder_Build_Errors(t *testing.T) {
	src := appSources(t)
	tests := []struct {
		name   string
		change func(s *Spec)
		want   string
		is     error
	}{
		{
			name:   "missing source file",
			change: func(s *Spec) { s.Files[1].Source = filepath.Join(src, "missing") },
			want:   "failed to build image localhost/app:v1.2.3: failed to add /usr/local/bin/helper: stat " + filepath.Join(src, "missing"),
			is:     fs.ErrNotExist,
		},
		{
			name:   "source is a directory",
			change: func(s *Spec) { s.Files[1].Source = src },
			want:   "failed to add /usr/local/bin/helper: " + src + " is not a regular file",
		},
		{name: "no source", change: func(s *Spec) { s.Files[1].Source = "" }, want: "failed to add /usr/local/bin/helper: no source file"},
		{name: "relative path", change: func(s *Spec) { s.Files[1].Path = "usr/bin/helper" }, want: `invalid image path "usr/bin/helper"`},
		{name: "unclean path", change: func(s *Spec) { s.Files[1].Path = "/usr/../bin/helper" }, want: `invalid image path "/usr/../bin/helper"`},
		{name: "root as a directory", change: func(s *Spec) { s.Dirs[0].Path = "/" }, want: `invalid image path "/"`},
		{name: "path listed twice", change: func(s *Spec) { s.Files[1].Path = "/usr/local/bin/app" }, want: "failed to add /usr/local/bin/app: listed twice"},
		{name: "file used as a directory", change: func(s *Spec) { s.Files[1].Path = "/usr/local/bin/app/helper" }, want: "/usr/local/bin/app is a file, not a directory"},
		{name: "file mode with a type", change: func(s *Spec) { s.Files[1].Mode = fs.ModeSymlink | 0o777 }, want: "is not a regular file's"},
		{name: "reference without tag", change: func(s *Spec) { s.Ref = "localhost/app" }, want: "failed to build image localhost/app: failed to parse reference"},
		{name: "reference without registry", change: func(s *Spec) { s.Ref = "app:v1" }, want: "failed to parse reference"},
		{name: "reference with digest", change: func(s *Spec) { s.Ref = "localhost/app@sha256:" + strings.Repeat("0", 64) }, want: "failed to parse reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := appSpec(src)
			tt.change(&s)
			_, err := testBuilder(t, "").Build(s)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build() = %v; want an error containing %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Build() = %v; want errors.Is(err, %v)", err, tt.is)
			}
		})
	}
}

func TestSourceDateEpoch_SourceDateEpoch_FromEnvironment(t *testing.T) {
	tests := []struct {
		name    string
		value   *string
		want    time.Time
		wantErr bool
	}{
		{name: "unset", want: time.Unix(0, 0)},
		{name: "empty", value: ptr(""), want: time.Unix(0, 0)},
		{name: "seconds", value: ptr("1700000000"), want: time.Unix(1700000000, 0)},
		{name: "not a number", value: ptr("yesterday"), wantErr: true},
		{name: "negative", value: ptr("-1"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SOURCE_DATE_EPOCH", "")
			if tt.value == nil {
				os.Unsetenv("SOURCE_DATE_EPOCH")
			} else {
				t.Setenv("SOURCE_DATE_EPOCH", *tt.value)
			}
			got, err := SourceDateEpoch()
			if (err != nil) != tt.wantErr {
				t.Fatalf("SourceDateEpoch() = %v, %v; want error %v", got, err, tt.wantErr)
			}
			if !got.Equal(tt.want) {
				t.Errorf("SourceDateEpoch() = %v; want %v", got, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
