package provider

// These tests drive the resources through pulumi-go-provider's in-process
// server, so they cover what the engine sees: secrecy of outputs, the empty
// ID that signals deletion on Read, and replace-vs-update diffs.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blang/semver"
	"github.com/google/go-cmp/cmp"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/integration"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

func newServer(t *testing.T) integration.Server {
	t.Helper()
	prov, err := New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := integration.NewServer(t.Context(), Name, semver.MustParse(Version), integration.WithProvider(prov))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testURN(typ, name string) resource.URN {
	return resource.NewURN("dev", "t", "", tokens.Type(Name+":index:"+typ), name)
}

// createFile runs Check then Create for a File, like the engine does.
func createFile(t *testing.T, s integration.Server, inputs map[string]property.Value) p.CreateResponse {
	t.Helper()
	urn := testURN("File", "f")
	checked, err := s.Check(p.CheckRequest{Urn: urn, Inputs: property.NewMap(inputs)})
	if err != nil || len(checked.Failures) > 0 {
		t.Fatalf("Check: err=%v failures=%v", err, checked.Failures)
	}
	created, err := s.Create(p.CreateRequest{Urn: urn, Properties: checked.Inputs})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return created
}

func secrecy(m property.Map) map[string]bool {
	out := map[string]bool{}
	for k, v := range m.All {
		out[k] = v.Secret()
	}
	return out
}

func TestProvider_GetSchema_ResourceTokens(t *testing.T) {
	t.Parallel()
	resp, err := newServer(t).GetSchema(p.GetSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"File", "Random", "Flaky", "Sleep", "Hog"} {
		if tok := `"` + Name + ":index:" + typ + `"`; !strings.Contains(resp.Schema, tok) {
			t.Errorf("schema lacks resource %s", tok)
		}
	}
}

func TestFile_Create_WritesFileAndKeepsContentSecret(t *testing.T) {
	root := t.TempDir()
	t.Setenv(RootEnvVar, root)
	s := newServer(t)

	created := createFile(t, s, map[string]property.Value{
		"path":    property.New("dir/sub/secret.txt"),
		"content": property.New("hunter2").WithSecret(true),
	})

	data, err := os.ReadFile(filepath.Join(root, "dir", "sub", "secret.txt"))
	if err != nil || string(data) != "hunter2" {
		t.Fatalf("file content = %q, %v; want hunter2", data, err)
	}
	if created.ID != "dir/sub/secret.txt" {
		t.Errorf("ID = %q", created.ID)
	}
	want := map[string]bool{"path": false, "content": true, "sha256": true}
	if diff := cmp.Diff(want, secrecy(created.Properties)); diff != "" {
		t.Errorf("secrecy mismatch (-want +got):\n%s", diff)
	}
	// sha256("hunter2")
	if got := created.Properties.Get("sha256").AsString(); got != "f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7" {
		t.Errorf("sha256 = %s", got)
	}
}

func TestFile_Create_PlainContentIsNotSecret(t *testing.T) {
	t.Setenv(RootEnvVar, t.TempDir())
	created := createFile(t, newServer(t), map[string]property.Value{
		"path": property.New("plain.txt"), "content": property.New("hello"),
	})
	want := map[string]bool{"path": false, "content": false, "sha256": false}
	if diff := cmp.Diff(want, secrecy(created.Properties)); diff != "" {
		t.Errorf("secrecy mismatch (-want +got):\n%s", diff)
	}
}

func TestFile_Create_ErrorsWithoutRoot(t *testing.T) {
	t.Setenv(RootEnvVar, "")
	s := newServer(t)
	_, err := s.Create(p.CreateRequest{Urn: testURN("File", "f"), Properties: property.NewMap(map[string]property.Value{
		"path": property.New("x"), "content": property.New("y"),
	})})
	if err == nil || !strings.Contains(err.Error(), RootEnvVar) {
		t.Fatalf("Create error = %v, want one naming %s", err, RootEnvVar)
	}
}

func TestFile_Read_MissingFileReportsDeleted(t *testing.T) {
	root := t.TempDir()
	t.Setenv(RootEnvVar, root)
	s := newServer(t)
	inputs := map[string]property.Value{"path": property.New("gone.txt"), "content": property.New("x")}
	created := createFile(t, s, inputs)
	if err := os.Remove(filepath.Join(root, "gone.txt")); err != nil {
		t.Fatal(err)
	}

	read, err := s.Read(p.ReadRequest{
		ID: created.ID, Urn: testURN("File", "f"), Properties: created.Properties, Inputs: property.NewMap(inputs),
	})
	if err != nil {
		t.Fatal(err)
	}
	if read.ID != "" {
		t.Errorf("Read ID = %q, want empty (deleted)", read.ID)
	}
}

func TestFile_Read_ReportsHandEditedContent(t *testing.T) {
	root := t.TempDir()
	t.Setenv(RootEnvVar, root)
	s := newServer(t)
	inputs := map[string]property.Value{
		"path": property.New("drift.txt"), "content": property.New("original").WithSecret(true),
	}
	created := createFile(t, s, inputs)
	if err := os.WriteFile(filepath.Join(root, "drift.txt"), []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}

	read, err := s.Read(p.ReadRequest{
		ID: created.ID, Urn: testURN("File", "f"), Properties: created.Properties, Inputs: property.NewMap(inputs),
	})
	if err != nil {
		t.Fatal(err)
	}
	if read.ID != created.ID {
		t.Errorf("Read ID = %q, want %q", read.ID, created.ID)
	}
	for what, m := range map[string]property.Map{"state": read.Properties, "inputs": read.Inputs} {
		v := m.Get("content")
		if v.AsString() != "edited" || !v.Secret() {
			t.Errorf("%s content = %q (secret %v), want secret %q", what, v.AsString(), v.Secret(), "edited")
		}
	}
}

func TestFile_Delete_RemovesFileAndToleratesMissing(t *testing.T) {
	root := t.TempDir()
	t.Setenv(RootEnvVar, root)
	s := newServer(t)
	created := createFile(t, s, map[string]property.Value{"path": property.New("d.txt"), "content": property.New("x")})
	for range 2 { // second delete finds the file already gone
		if err := s.Delete(p.DeleteRequest{ID: created.ID, Urn: testURN("File", "f"), Properties: created.Properties}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "d.txt")); !os.IsNotExist(err) {
		t.Errorf("file still exists: stat err = %v", err)
	}
}

func TestFile_Diff_PathReplacesAndContentUpdates(t *testing.T) {
	t.Setenv(RootEnvVar, t.TempDir())
	s := newServer(t)
	old := map[string]property.Value{"path": property.New("a.txt"), "content": property.New("x")}
	created := createFile(t, s, old)
	cases := map[string]struct {
		news map[string]property.Value
		want map[string]p.DiffKind
	}{
		"content change updates": {
			map[string]property.Value{"path": property.New("a.txt"), "content": property.New("y")},
			map[string]p.DiffKind{"content": p.Update},
		},
		"no change": {
			old, map[string]p.DiffKind{},
		},
		"path change replaces": {
			map[string]property.Value{"path": property.New("b.txt"), "content": property.New("x")},
			map[string]p.DiffKind{"path": p.UpdateReplace},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp, err := s.Diff(p.DiffRequest{
				ID: created.ID, Urn: testURN("File", "f"), State: created.Properties,
				OldInputs: property.NewMap(old), Inputs: property.NewMap(tc.news),
			})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]p.DiffKind{}
			for k, d := range resp.DetailedDiff {
				got[k] = d.Kind
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("diff mismatch (-want +got):\n%s", diff)
			}
			if resp.HasChanges != (len(tc.want) > 0) {
				t.Errorf("HasChanges = %v, want %v", resp.HasChanges, len(tc.want) > 0)
			}
			if !resp.DeleteBeforeReplace {
				t.Error("DeleteBeforeReplace = false; a path change must delete the old file first")
			}
		})
	}
}

func TestRandom_Create_ResultIsSecretAndReadIsStable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	urn := testURN("Random", "r")
	checked, err := s.Check(p.CheckRequest{Urn: urn, Inputs: property.NewMap(nil)})
	if err != nil || len(checked.Failures) > 0 {
		t.Fatalf("Check: err=%v failures=%v", err, checked.Failures)
	}
	created, err := s.Create(p.CreateRequest{Urn: urn, Properties: checked.Inputs})
	if err != nil {
		t.Fatal(err)
	}
	result := created.Properties.Get("result")
	if !result.Secret() || len(result.AsString()) != randomDefaultLength {
		t.Errorf("result = %q (secret %v), want a secret of %d characters",
			result.AsString(), result.Secret(), randomDefaultLength)
	}
	read, err := s.Read(p.ReadRequest{ID: created.ID, Urn: urn, Properties: created.Properties, Inputs: checked.Inputs})
	if err != nil {
		t.Fatal(err)
	}
	if read.ID != created.ID || !read.Properties.Get("result").Secret() ||
		read.Properties.Get("result").AsString() != result.AsString() {
		t.Errorf("Read changed the resource: id %q, result %v", read.ID, read.Properties.Get("result"))
	}
}
