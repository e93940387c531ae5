package enginetest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
)

const smokeProgram = `name: smoke
runtime: yaml
resources:
  greeting:
    type: stackwright-testing:index:File
    properties:
      path: greeting.txt
      content: hello
outputs:
  digest: ${greeting.sha256}
`

// The whole lifecycle runs through the real CLI, YAML host and test provider, and every
// step is checked against the file on disk: nothing here can pass without the engine.
func TestEnv_Stack_LifecycleObservesRealFiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := New(t)
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "Pulumi.yaml"), []byte(smokeProgram), 0o600); err != nil {
		t.Fatal(err)
	}
	stack, err := auto.UpsertStackLocalSource(ctx, "dev", work, e.WorkspaceOptions(work)...)
	if err != nil {
		t.Fatalf("failed to create stack: %v", err)
	}
	file := filepath.Join(e.Files, "greeting.txt")

	up, err := stack.Up(ctx)
	if err != nil {
		t.Fatalf("up failed: %v", err)
	}
	if diff := cmp.Diff(map[string]int{"create": 2}, changes(up.Summary)); diff != "" {
		t.Errorf("up changes (-want +got):\n%s", diff)
	}
	requireContent(t, file, "hello")
	// sha256("hello")
	if got := up.Outputs["digest"].Value; got != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Errorf("output digest = %v; want the sha256 of the file's content", got)
	}

	pre, err := stack.Preview(ctx)
	if err != nil {
		t.Fatalf("preview failed: %v", err)
	}
	if diff := cmp.Diff(map[apitype.OpType]int{apitype.OpSame: 2}, pre.ChangeSummary); diff != "" {
		t.Errorf("preview after up should change nothing (-want +got):\n%s", diff)
	}

	if err := os.WriteFile(file, []byte("edited by hand"), 0o600); err != nil {
		t.Fatal(err)
	}
	drift, err := stack.PreviewRefresh(ctx)
	if err != nil {
		t.Fatalf("refresh preview failed: %v", err)
	}
	if drift.ChangeSummary[apitype.OpUpdate] != 1 {
		t.Errorf("refresh preview after editing the file reported %v; want one update", drift.ChangeSummary)
	}

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	ref, err := stack.Refresh(ctx)
	if err != nil {
		t.Fatalf("refresh failed: %v", err)
	}
	if changes(ref.Summary)["delete"] != 1 {
		t.Errorf("refresh after deleting the file reported %v; want one delete", changes(ref.Summary))
	}

	if _, err := stack.Up(ctx); err != nil {
		t.Fatalf("second up failed: %v", err)
	}
	requireContent(t, file, "hello")

	if _, err := stack.Destroy(ctx); err != nil {
		t.Fatalf("destroy failed: %v", err)
	}
	if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after destroy, stat(%s) = %v; want not exist", file, err)
	}
}

func changes(s auto.UpdateSummary) map[string]int {
	if s.ResourceChanges == nil {
		return nil
	}
	return *s.ResourceChanges
}

func requireContent(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("failed to read %s: %v", path, err)
	}
	if string(got) != want {
		t.Fatalf("%s holds %q; want %q", path, got, want)
	}
}
