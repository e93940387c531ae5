package artifact

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPack_Pack_Deterministic(t *testing.T) {
	base := map[string][]byte{"Pulumi.yaml": []byte("name: x\nruntime: yaml\n"), "src/a.txt": []byte("a")}
	digest := func(files map[string][]byte) string {
		t.Helper()
		b, err := Pack(files)
		if err != nil {
			t.Fatalf("Pack() = %v", err)
		}
		return Digest(b)
	}
	want := digest(base)
	tests := []struct {
		name  string
		files map[string][]byte
		same  bool
	}{
		{name: "same content in a new map", files: map[string][]byte{"src/a.txt": []byte("a"), "Pulumi.yaml": []byte("name: x\nruntime: yaml\n")}, same: true},
		{name: "one byte changed", files: map[string][]byte{"Pulumi.yaml": []byte("name: y\nruntime: yaml\n"), "src/a.txt": []byte("a")}},
		{name: "file renamed", files: map[string][]byte{"Pulumi.yaml": []byte("name: x\nruntime: yaml\n"), "src/b.txt": []byte("a")}},
		{name: "file added", files: map[string][]byte{"Pulumi.yaml": []byte("name: x\nruntime: yaml\n"), "src/a.txt": []byte("a"), "c": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := digest(tt.files); (got == want) != tt.same {
				t.Errorf("digest = %s, base digest = %s; want same=%v", got, want, tt.same)
			}
		})
	}
}

func TestPack_Pack_RoundTripsThroughExtract(t *testing.T) {
	files := map[string][]byte{"Pulumi.yaml": []byte("name: x\n"), "a/b/c": []byte("deep"), "empty": {}}
	b, err := Pack(files)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := Extract(bytes.NewReader(b), out, Limits{}); err != nil {
		t.Fatalf("Extract(Pack()) = %v", err)
	}
	want := map[string]string{"Pulumi.yaml": "name: x\n", "a/": "", "a/b/": "", "a/b/c": "deep", "empty": ""}
	if diff := cmp.Diff(want, tree(t, out)); diff != "" {
		t.Errorf("extracted (-want +got):\n%s", diff)
	}
}

func TestPack_Pack_RefusesNamesExtractWouldNot(t *testing.T) {
	tests := []struct {
		name  string
		files map[string][]byte
	}{
		{name: "empty name", files: map[string][]byte{"": nil}},
		{name: "absolute", files: map[string][]byte{"/a": nil}},
		{name: "dot-dot", files: map[string][]byte{"../a": nil}},
		{name: "not clean", files: map[string][]byte{"a//b": nil}},
		{name: "dot", files: map[string][]byte{".": nil}},
		{name: "trailing slash", files: map[string][]byte{"a/": nil}},
		{name: "file is also a directory", files: map[string][]byte{"a": nil, "a.txt": nil, "a/b": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Pack(tt.files); err == nil {
				t.Errorf("Pack(%q) succeeded; want an error", tt.files)
			}
		})
	}
}
