package program

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/source/program/project"
	"github.com/stackwright/stackwright/internal/testing/enginetest"
)

// upRendered takes p through the same path a runner does (render, pack, extract), sets
// config as a Stack would, and runs `pulumi up` on the result with the real CLI, YAML host
// and test provider.
func upRendered(t *testing.T, e *enginetest.Env, p *pulumiv1.Program, config auto.ConfigMap) auto.UpResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tarball, err := project.Tarball(p)
	if err != nil {
		t.Fatalf("Tarball() = %v", err)
	}
	dir := filepath.Join(t.TempDir(), "project")
	if err := artifact.Extract(bytes.NewReader(tarball), dir, artifact.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	stack, err := auto.UpsertStackLocalSource(ctx, "dev", dir, e.WorkspaceOptions(dir)...)
	if err != nil {
		t.Fatalf("failed to create stack: %v", err)
	}
	if err := stack.SetAllConfig(ctx, config); err != nil {
		t.Fatalf("failed to set config: %v", err)
	}
	up, err := stack.Up(ctx)
	if err != nil {
		rendered, _ := os.ReadFile(filepath.Join(dir, project.File))
		t.Fatalf("up failed: %v\nPulumi.yaml:\n%s", err, rendered)
	}
	return up
}

func outputs(up auto.UpResult) map[string]any {
	got := map[string]any{}
	for k, v := range up.Outputs {
		if !v.Secret {
			got[k] = v.Value
		}
	}
	return got
}

func raw(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

func program(spec pulumiv1.ProgramSpec) *pulumiv1.Program {
	return &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "prog", Namespace: "ns"}, Program: spec}
}

// The rendered project runs: every section reaches the engine, configuration defaults flow
// into properties, expressions and fn:: calls are evaluated by the YAML host, and stack
// config set the way PKO Stacks set it (strings, lists as JSON text, "True") is accepted,
// which the newer `config` block would refuse.
func TestRender_Render_RunsOnRealEngine(t *testing.T) {
	e := enginetest.New(t)
	p := program(pulumiv1.ProgramSpec{
		Configuration: map[string]pulumiv1.Configuration{
			"message": {Type: "String", Default: raw(`"hello"`)},
			"length":  {Type: "Int", Default: raw(`12`)},
			"ratio":   {Type: "Number", Default: raw(`1.5`)},
			"tags":    {Type: "List<String>", Default: raw(`["a","b"]`)},
			"enabled": {Type: "Boolean", Default: raw(`false`)},
		},
		Variables: map[string]apiextensionsv1.JSON{
			"banner": *raw(`{"fn::join":["-","${tags}"]}`),
		},
		Resources: map[string]pulumiv1.Resource{
			"token": {Type: "stackwright-testing:index:Random", Properties: map[string]apiextensionsv1.JSON{"length": *raw(`"${length}"`)}},
			"greeting": {Type: "stackwright-testing:index:File", Properties: map[string]apiextensionsv1.JSON{
				"path": *raw(`"greeting.txt"`), "content": *raw(`"${message}"`),
			}},
			"tokenFile": {
				Type:       "stackwright-testing:index:File",
				Properties: map[string]apiextensionsv1.JSON{"path": *raw(`"token.txt"`), "content": *raw(`"${token.result}"`)},
				Options:    &pulumiv1.ResourceOptions{DependsOn: []apiextensionsv1.JSON{*raw(`"${greeting}"`)}},
			},
		},
		Outputs: map[string]apiextensionsv1.JSON{
			"digest":  *raw(`"${greeting.sha256}"`),
			"banner":  *raw(`"${banner}"`),
			"enabled": *raw(`"${enabled}"`),
			"length":  *raw(`"${token.length}"`),
			"ratio":   *raw(`"${ratio}"`),
		},
	})

	up := upRendered(t, e, p, auto.ConfigMap{
		"tags":    {Value: `["x","y"]`},
		"enabled": {Value: "True"},
	})

	sum := sha256.Sum256([]byte("hello"))
	want := map[string]any{"digest": hex.EncodeToString(sum[:]), "banner": "x-y", "enabled": true, "length": float64(12), "ratio": 1.5}
	if diff := cmp.Diff(want, outputs(up)); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	if b, err := os.ReadFile(filepath.Join(e.Files, "greeting.txt")); err != nil || string(b) != "hello" {
		t.Errorf("greeting.txt = %q, %v; want the configuration default %q", b, err, "hello")
	}
	if b, err := os.ReadFile(filepath.Join(e.Files, "token.txt")); err != nil || len(b) != 12 {
		t.Errorf("token.txt = %q, %v; want 12 random characters", b, err)
	}
}
