package engine

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/internal/testing/enginetest"
)

// configProgram exports what it receives, to show the types the program sees.
const configProgram = `name: cfgtest
runtime: yaml
config:
  count:
    type: integer
  enabled:
    type: boolean
  settings:
    type: object
  names:
    type: array
    items:
      type: string
  greeting:
    type: string
  label:
    type: string
  password:
    type: string
variables:
  ratio: ${cfgtest:ratio}
resources:
  secretFile:
    type: stackwright-testing:index:File
    properties:
      path: secret.txt
      content: ${password}
outputs:
  count: ${count}
  enabled: ${enabled}
  settings: ${settings}
  names: ${names}
  greeting: ${greeting}
  label: ${label}
  ratio: ${ratio}
  password: ${password}
`

const testPassword = "s3cr3t-pa55word"

func configRequest(t *testing.T, f *fixture) Request {
	r := f.request(OpUp)
	r.Config = map[string]ConfigValue{
		"count":            {Value: json.RawMessage(`3`)},
		"enabled":          {Value: json.RawMessage(`true`)},
		"settings":         {Value: json.RawMessage(`{"a": 1, "nested": {"b": [1, "x", 2.5]}}`)},
		"names":            {Value: json.RawMessage(`["a", "b"]`)},
		"cfgtest:greeting": {Value: json.RawMessage(`"hello"`)},
		"label":            {Value: json.RawMessage(`"42"`)},
		"ratio":            {Value: json.RawMessage(`2.5`)},
		"password":         {Value: jsonValue(t, testPassword), Secret: true},
	}
	return r
}

var wantConfigOutputs = map[string]Output{
	"count":   {Value: float64(3)},
	"enabled": {Value: true},
	"settings": {Value: map[string]any{
		"a":      float64(1),
		"nested": map[string]any{"b": []any{float64(1), "x", 2.5}},
	}},
	"names":    {Value: []any{"a", "b"}},
	"greeting": {Value: "hello"},
	// Pulumi's quirk, not ours: top-level config strings that look like integers reach the
	// program as numbers, even when declared as strings (see configValue).
	"label":    {Value: float64(42)},
	"ratio":    {Value: 2.5},
	"password": {Value: testPassword, Secret: true},
}

func TestEngine_Run_StructuredAndSecretConfigReachProgram(t *testing.T) {
	t.Parallel()
	f := newFixture(t, configProgram)
	res := f.mustRun(testContext(t), configRequest(t, f))

	if diff := cmp.Diff(wantConfigOutputs, res.Outputs); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	f.requireContent("secret.txt", testPassword)
	settings, err := os.ReadFile(filepath.Join(f.work, "Pulumi.dev.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(settings), testPassword) {
		t.Errorf("Pulumi.dev.yaml holds the secret in clear:\n%s", settings)
	}
	if strings.Contains(f.log.String(), testPassword) {
		t.Errorf("the log holds the secret in clear:\n%s", f.log)
	}
}

// A work dir extracted afresh has no Pulumi.dev.yaml: the stack's secrets provider (and
// passphrase salt) must come from its state, or the secrets written before become unreadable.
func TestEngine_Run_FreshWorkDirKeepsStackSecrets(t *testing.T) {
	t.Parallel()
	f := newFixture(t, configProgram)
	ctx := testContext(t)
	f.mustRun(ctx, configRequest(t, f))
	firstSalt := encryptionSalt(t, f.work)

	f.work = f.workDir(configProgram)
	res := f.mustRun(ctx, configRequest(t, f))
	// Same salt: the CLI reused the stack's secrets manager from its state. (Without the
	// fallback, passphrase stacks would still work with a new salt each run, but a stack
	// using a KMS or the service would be switched to the backend's default provider.)
	if got := encryptionSalt(t, f.work); got != firstSalt {
		t.Errorf("encryption salt in the fresh work dir = %q; want the stack's %q", got, firstSalt)
	}
	if diff := cmp.Diff(wantConfigOutputs, res.Outputs); diff != "" {
		t.Errorf("outputs after a run in a fresh work dir (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"same": 2}, res.Changes); diff != "" {
		t.Errorf("changes after a run in a fresh work dir (-want +got):\n%s", diff)
	}
}

func encryptionSalt(t *testing.T, workDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(workDir, "Pulumi.dev.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if salt, ok := strings.CutPrefix(line, "encryptionsalt: "); ok {
			return salt
		}
	}
	t.Fatalf("no encryptionsalt in Pulumi.dev.yaml:\n%s", b)
	return ""
}

func TestEngine_Run_InvalidConfigIsPermanentAndTouchesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, filesProgram)
	ctx := testContext(t)
	r := f.request(OpUp)
	r.Config = map[string]ConfigValue{"greeting": {Value: json.RawMessage(`{"unterminated"`)}}
	_, err := f.eng.Run(ctx, r)
	if got := Classify(err); got != ClassPermanent {
		t.Fatalf("Classify(%v) = %q; want Permanent", err, got)
	}
	const want = `failed to set config of stack dev: invalid config value for "greeting": not valid JSON`
	if msg := Message(err); msg != want {
		t.Errorf("Message = %q; want %q", msg, want)
	}
	sel := f.request(OpPreview)
	sel.CreateStack = false
	if _, err := f.eng.Run(ctx, sel); !strings.Contains(Message(err), "does not exist") {
		t.Errorf("after invalid config, selecting the stack: %v; want it never created", err)
	}
}

func TestEngine_Environment_Layers(t *testing.T) {
	e := &Engine{bin: "/opt/sw/bin", env: map[string]string{
		"PULUMI_SKIP_UPDATE_CHECK":  "true",
		"PULUMI_SKIP_CONFIRMATIONS": "true",
		"PATH":                      "/usr/bin",
	}}
	got := e.environment(Request{Env: map[string]string{
		"PULUMI_BACKEND_URL":       "file:///state",
		"PULUMI_SKIP_UPDATE_CHECK": "false",
	}})
	want := map[string]string{
		"PULUMI_SKIP_UPDATE_CHECK":                 "false",
		"PULUMI_SKIP_CONFIRMATIONS":                "false",
		"PULUMI_BACKEND_URL":                       "file:///state",
		"PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true",
		"PATH": "/opt/sw/bin:/usr/bin",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
	// A PATH that already starts with Bin is left alone.
	got = e.environment(Request{Env: map[string]string{"PATH": "/opt/sw/bin:/bin"}})
	if got["PATH"] != "/opt/sw/bin:/bin" {
		t.Errorf("PATH = %q; want /opt/sw/bin:/bin", got["PATH"])
	}
}

// TestEngine_Run_ProcessEnvironmentDoesNotReachProgram sets the provider's root only in
// this process's environment: the program must not see it, as it must not see anything
// of the manager's own environment that the Stack did not pass.
func TestEngine_Run_ProcessEnvironmentDoesNotReachProgram(t *testing.T) {
	f := newFixture(t, filesProgram)
	t.Setenv(enginetest.ProviderRootEnv, f.env.Files)
	r := f.request(OpUp)
	r.Env = maps.Clone(r.Env)
	delete(r.Env, enginetest.ProviderRootEnv)
	_, err := f.eng.Run(testContext(t), r)
	if err == nil {
		t.Fatal("up succeeded: the program saw a variable of the manager's environment")
	}
	if msg := Message(err); !strings.Contains(msg, enginetest.ProviderRootEnv+" is not set") {
		t.Errorf("Message = %q; want the provider to report %s unset", msg, enginetest.ProviderRootEnv)
	}
	f.requireGone("a.txt")
}
