package sbom

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/internal/testing/repo"
)

// helloFile is testdata/hello built by TestMain: a real binary that links one known module
// (a test binary's own build info lists no dependencies).
var helloFile string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sbom-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	helloFile = filepath.Join(dir, "hello")
	if out, err := exec.Command("go", "build", "-o", helloFile, "./testdata/hello").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./testdata/hello: %v: %s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// seeHello records testdata/hello's sources as this test process's inputs: what TestMain
// reads before m.Run is not in the record `go test` reuses results by.
var seeHello sync.Once

func testBinary(t *testing.T) Binary {
	t.Helper()
	seeHello.Do(func() {
		if err := repo.SeeBuildInputs(".", "", "./testdata/hello"); err != nil {
			t.Fatal(err)
		}
	})
	return Binary{File: helloFile, Path: "/usr/local/bin/hello", Platform: "linux/" + runtime.GOARCH}
}

func TestBuild_ListsTheModulesOfEachBinary(t *testing.T) {
	bin := testBinary(t)
	other := bin
	other.Platform = "linux/other"
	subject := Subject{Name: "registry.example/stackwright", Version: "v1.2.3", Digest: "sha256:abc", Source: "https://example/src", Revision: "0123", Licenses: "Apache-2.0"}
	bom, err := Build(subject, []Binary{bin, other}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := bom.Metadata.Component.Name, subject.Name; got != want {
		t.Errorf("subject = %q, want %q", got, want)
	}
	if got, want := bom.Metadata.Timestamp, "1970-01-01T00:00:00Z"; got != want {
		t.Errorf("timestamp = %q, want %q", got, want)
	}
	if len(*bom.Components) != 2 {
		t.Fatalf("components = %d, want one per binary (2)", len(*bom.Components))
	}
	c := (*bom.Components)[0]
	if c.BOMRef != bin.Platform+":"+bin.Path || c.Name != "hello" || c.Type != cdx.ComponentTypeApplication {
		t.Errorf("binary component = %q %q %q", c.BOMRef, c.Name, c.Type)
	}
	if c.Hashes == nil || len((*c.Hashes)[0].Value) != 64 {
		t.Errorf("binary hashes = %v, want a SHA-256", c.Hashes)
	}
	var found *cdx.Component
	for i, m := range *c.Components {
		if m.Name == "github.com/CycloneDX/cyclonedx-go" {
			found = &(*c.Components)[i]
		}
	}
	if found == nil {
		t.Fatal("the cyclonedx-go module linked into the test binary is not listed")
	}
	if diff := cmp.Diff([]string{"v0.12.0", "pkg:golang/github.com/CycloneDX/cyclonedx-go@v0.12.0"}, []string{found.Version, found.PackageURL}); diff != "" {
		t.Errorf("module version and purl (-want +got):\n%s", diff)
	}
	deps := *bom.Dependencies
	if got := *deps[0].Dependencies; !cmp.Equal(got, []string{bin.Platform + ":" + bin.Path, other.Platform + ":" + other.Path}) {
		t.Errorf("the image depends on %v, want both binaries", got)
	}
	if got := len(*deps[1].Dependencies); got != len(*c.Components) {
		t.Errorf("the binary depends on %d modules, lists %d", got, len(*c.Components))
	}
}

func TestEncode_IsReproducibleAndDecodes(t *testing.T) {
	subject := Subject{Name: "r/stackwright-runner", Version: "v0.1.0"}
	var docs [2]bytes.Buffer
	for i := range docs {
		bom, err := Build(subject, []Binary{testBinary(t)}, time.Unix(42, 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := Encode(&docs[i], bom); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(docs[0].Bytes(), docs[1].Bytes()) {
		t.Error("two builds of the same inputs differ")
	}
	var back cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(docs[0].Bytes()), cdx.BOMFileFormatJSON).Decode(&back); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if back.BOMFormat != "CycloneDX" || back.Metadata.Component.Version != "v0.1.0" {
		t.Errorf("decoded format %q, version %q", back.BOMFormat, back.Metadata.Component.Version)
	}
}

func TestBuild_RefusesAFileWithoutBuildInfo(t *testing.T) {
	f := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Build(Subject{Name: "r/x"}, []Binary{{File: f, Path: "/bin/script", Platform: "linux/amd64"}}, time.Unix(0, 0))
	if err == nil || !strings.Contains(err.Error(), "build info") {
		t.Errorf("err = %v, want a refusal naming the missing build info", err)
	}
}

func TestPurl_EscapesSegmentsAndVersion(t *testing.T) {
	tests := []struct{ name, path, version, want string }{
		{"PlainModule", "github.com/a/b", "v1.0.0", "pkg:golang/github.com/a/b@v1.0.0"},
		{"PseudoVersionWithPlus", "example.com/m", "v0.0.0+incompatible", "pkg:golang/example.com/m@v0.0.0+incompatible"},
		{"LocalReplacementHasNoVersion", "example.com/local", "", "pkg:golang/example.com/local"},
		{"DevelBuildHasNoVersion", "example.com/main", "(devel)", "pkg:golang/example.com/main"},
		{"SpaceInSegment", "example.com/a b", "v1", "pkg:golang/example.com/a%20b@v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := purl(tt.path, tt.version); got != tt.want {
				t.Errorf("purl = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMainModule_IsTheModuleOfTheMainPackage(t *testing.T) {
	pulumi := &debug.Module{Path: "github.com/pulumi/pulumi/pkg/v3", Version: "v3.259.0"}
	sdk := &debug.Module{Path: "github.com/pulumi/pulumi/sdk/v3", Version: "v3.259.0"}
	tests := []struct {
		name string
		info buildinfo.BuildInfo
		want string
	}{
		{
			name: "OwnModule",
			info: buildinfo.BuildInfo{Path: "github.com/stackwright/stackwright/cmd/stackwright", Main: debug.Module{Path: "github.com/stackwright/stackwright", Version: "(devel)"}, Deps: []*debug.Module{sdk}},
			want: "github.com/stackwright/stackwright@(devel)",
		},
		{
			name: "ToolBuiltThroughAWrapperModule",
			info: buildinfo.BuildInfo{Path: "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi", Main: debug.Module{Path: "stackwright.dev/hack/tools/pulumi", Version: "(devel)"}, Deps: []*debug.Module{sdk, pulumi}},
			want: "github.com/pulumi/pulumi/pkg/v3@v3.259.0",
		},
		{
			name: "LongestPrefixWins",
			info: buildinfo.BuildInfo{Path: "example.com/a/b/cmd/x", Main: debug.Module{Path: "wrapper"}, Deps: []*debug.Module{{Path: "example.com/a", Version: "v1"}, {Path: "example.com/a/b", Version: "v2"}}},
			want: "example.com/a/b@v2",
		},
		{
			name: "ReplacedDependencyIsTheReplacement",
			info: buildinfo.BuildInfo{Path: "example.com/m/cmd", Main: debug.Module{Path: "wrapper"}, Deps: []*debug.Module{{Path: "example.com/m", Version: "v1", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.1"}}}},
			want: "example.com/fork@v1.1",
		},
		{
			name: "NoModuleOwnsThePackage",
			info: buildinfo.BuildInfo{Path: "command-line-arguments", Main: debug.Module{Path: "wrapper", Version: "(devel)"}},
			want: "wrapper@(devel)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mainModule(&tt.info)
			if got := m.Path + "@" + m.Version; got != tt.want {
				t.Errorf("main module = %s, want %s", got, tt.want)
			}
		})
	}
}
