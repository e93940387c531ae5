package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"sigs.k8s.io/yaml"
)

// TestRun_Configure_Environments_AppendedInOrder checks the stack settings file configure
// writes, without the CLI: the environments as the request names them (project-qualified
// or not), in its order, after those the project's own file imports, once however often
// configure runs in one Run, and next to the config and secrets settings already there.
func TestRun_Configure_Environments_AppendedInOrder(t *testing.T) {
	tests := []struct {
		name     string
		settings string // the project's Pulumi.dev.yaml; "" for none
		envs     []string
		config   map[string]ConfigValue
		want     map[string]any
	}{
		{
			name: "no settings file",
			envs: []string{"aws/dev-credentials", "infra-defaults", "aws/dev-credentials"},
			want: map[string]any{"environment": []any{"aws/dev-credentials", "infra-defaults", "aws/dev-credentials"}},
		},
		{
			name:     "after the project's own imports",
			settings: "encryptionsalt: v1:abc\nenvironment:\n  - platform/base\nconfig:\n  enginetest:kept: x\n",
			envs:     []string{"team/dev", "overrides"},
			config:   map[string]ConfigValue{"greeting": {Value: json.RawMessage(`"hi"`)}},
			want: map[string]any{
				"encryptionsalt": "v1:abc",
				"environment":    []any{"platform/base", "team/dev", "overrides"},
				"config":         map[string]any{"enginetest:kept": "x", "enginetest:greeting": "hi"},
			},
		},
		{
			name:     "into the project's inline environment",
			settings: "environment:\n  imports:\n    - platform/base\n  values:\n    pulumiConfig:\n      region: eu\n",
			envs:     []string{"team/dev"},
			want: map[string]any{"environment": map[string]any{
				"imports": []any{"platform/base", "team/dev"},
				"values":  map[string]any{"pulumiConfig": map[string]any{"region": "eu"}},
			}},
		},
		{
			name:     "none: the file is left alone",
			settings: "environment:\n  - platform/base\n",
			want:     map[string]any{"environment": []any{"platform/base"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "Pulumi.yaml"), "name: enginetest\nruntime: yaml\n")
			if tt.settings != "" {
				write(t, filepath.Join(dir, "Pulumi.dev.yaml"), tt.settings)
			}
			ctx := context.Background()
			// The workspace only reads and writes files here: no CLI runs.
			ws, err := auto.NewLocalWorkspace(ctx, auto.WorkDir(dir), auto.Pulumi(command{path: "pulumi-is-not-run"}))
			if err != nil {
				t.Fatal(err)
			}
			x := &run{req: Request{Stack: "dev", Environments: tt.envs}, scrub: newScrubber()}
			entries, err := parseConfig(tt.config)
			if err != nil {
				t.Fatal(err)
			}
			// Twice, as Run does when it had to create the stack after all.
			for range 2 {
				if err := x.configure(ctx, ws, "dev", "enginetest", entries); err != nil {
					t.Fatalf("configure: %v", err)
				}
			}
			got := map[string]any{}
			if b, err := os.ReadFile(filepath.Join(dir, "Pulumi.dev.yaml")); err == nil {
				if err := yaml.Unmarshal(b, &got); err != nil {
					t.Fatalf("Pulumi.dev.yaml is not YAML: %v\n%s", err, b)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Pulumi.dev.yaml (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequest_Validate_EmptyEnvironmentName(t *testing.T) {
	r := Request{Operation: OpUp, WorkDir: "/w", Stack: "dev", Environments: []string{"a/b", ""}}
	if err := r.validate(); err == nil || err.Error() != "an environment name is empty" {
		t.Errorf("validate() = %v; want an environment name is empty", err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
