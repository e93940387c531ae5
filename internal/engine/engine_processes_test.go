package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/internal/testing/pulumicount"
)

// plainProgram has outputs but no secret ones: the event log carries all of them.
const plainProgram = `name: plain
runtime: yaml
config:
  greeting:
    type: string
    default: hello
resources:
  a:
    type: stackwright-testing:index:File
    properties:
      path: a.txt
      content: ${greeting}
outputs:
  aDigest: ${a.sha256}
  shape:
    n: 3
    list: [x, y]
`

// TestEngine_Run_ProcessesPerOperation pins the CLI processes each kind of run starts: the
// operation alone when the stack is known to exist, one more to create a new stack, one
// more to read secret outputs' values (which the event log never holds), and one per
// secret config value the engine has not encrypted for the stack before.
func TestEngine_Run_ProcessesPerOperation(t *testing.T) {
	t.Parallel()
	type step struct {
		op          Operation
		exists      bool
		secretValue bool // sets a secret config value that no output depends on
		want        []string
	}
	tests := []struct {
		name    string
		program string
		// cli makes the engine read secret outputs through the CLI, as it does for
		// backends other than file:// with a passphrase.
		cli   bool
		steps []step
	}{
		{"plain outputs", plainProgram, false, []step{
			{op: OpPreview, want: []string{"stack init", "preview --stack"}},
			{op: OpUp, want: []string{"stack init", "up --yes"}},
			{op: OpUp, exists: true, want: []string{"up --yes"}},
			{op: OpPreview, exists: true, want: []string{"preview --message=x"}},
			{op: OpDrift, exists: true, want: []string{"refresh --preview-only"}},
			{op: OpRefresh, exists: true, want: []string{"refresh --yes"}},
			{op: OpUp, exists: true, secretValue: true, want: []string{"config set", "up --yes"}},
			// The engine remembers the ciphertext: the same value costs no process again.
			{op: OpUp, exists: true, secretValue: true, want: []string{"up --yes"}},
			{op: OpDestroy, exists: true, want: []string{"destroy --yes"}},
		}},
		{"secret outputs read from the state", filesProgram, false, []step{
			{op: OpUp, want: []string{"stack init", "up --yes"}},
			{op: OpUp, exists: true, want: []string{"up --yes"}},
			{op: OpDrift, exists: true, want: []string{"refresh --preview-only"}},
		}},
		{"secret outputs read by the CLI", filesProgram, true, []step{
			{op: OpUp, want: []string{"stack init", "up --yes", "stack output"}},
			{op: OpUp, exists: true, want: []string{"up --yes", "stack output"}},
			{op: OpDestroy, exists: true, want: []string{"destroy --yes"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tt.program)
			counter, err := pulumicount.New(f.env.Bin, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if f.eng, err = New(Options{Bin: counter.Bin, PulumiHome: f.env.Home, SkipVersionCheck: true}); err != nil {
				t.Fatal(err)
			}
			f.eng.noStateRead = tt.cli
			ctx := testContext(t)
			for i, s := range tt.steps {
				before := counter.Count()
				r := f.request(s.op)
				r.StackExists = s.exists
				if s.op == OpPreview && s.exists {
					r.Message = "x"
				}
				if s.secretValue {
					v, _ := json.Marshal("hi")
					r.Config = map[string]ConfigValue{"other": {Value: v, Secret: true}}
				}
				f.mustRun(ctx, r)
				got := counter.Starts()[before:]
				if diff := cmp.Diff(s.want, got); diff != "" {
					t.Errorf("step %d (%s, exists=%v): pulumi processes (-want +got):\n%s", i, s.op, s.exists, diff)
				}
			}
		})
	}
}

// TestEngine_Run_StackGoneDespiteHintIsCreated covers a wrong StackExists: the stack is
// created after the operation finds it missing, and the run succeeds.
func TestEngine_Run_StackGoneDespiteHintIsCreated(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plainProgram)
	r := f.request(OpUp)
	r.StackExists = true
	res := f.mustRun(testContext(t), r)
	want := Result{
		Outputs: map[string]Output{
			"aDigest": {Value: sha256Hex("hello")},
			"shape":   {Value: map[string]any{"n": float64(3), "list": []any{"x", "y"}}},
		},
		Changes: map[string]int{"create": 2},
		Message: "up succeeded: 2 created",
	}
	if diff := cmp.Diff(want, res, ignoreSteps); diff != "" {
		t.Errorf("up result (-want +got):\n%s", diff)
	}
}

// TestEngine_Run_ForeignCipherIsForgottenAndSetAgain covers a remembered ciphertext the
// stack's secrets manager cannot decrypt (the stack was recreated behind the engine's
// back): the run sets the value again and succeeds with it.
func TestEngine_Run_ForeignCipherIsForgottenAndSetAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, filesProgram)
	ctx := testContext(t)
	v, _ := json.Marshal("bonjour")
	r := f.request(OpUp)
	r.Config = map[string]ConfigValue{"greeting": {Value: v, Secret: true}}
	f.mustRun(ctx, r)

	f.eng.ciphers.mu.Lock()
	for _, m := range f.eng.ciphers.stacks {
		for k := range m {
			m[k] = "v1:AAAAAAAAAAAAAAAA:BBBBBBBBBBBBBBBBBBBBBBBBBBBB"
		}
	}
	f.eng.ciphers.mu.Unlock()
	r.StackExists = true
	f.mustRun(ctx, r)
	f.requireContent("a.txt", "bonjour")
	if !strings.Contains(f.log.String(), "did not decrypt remembered secret config") {
		t.Errorf("the log does not say the remembered config was set again:\n%s", f.log)
	}
}

// TestEngine_Run_SecretOutputsFromStateMatchCLI compares the two ways of reading secret
// outputs on one stack: from the file backend's state and through the CLI.
func TestEngine_Run_SecretOutputsFromStateMatchCLI(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nestedSecretProgram)
	ctx := testContext(t)
	fromState := f.mustRun(ctx, f.request(OpUp))

	viaCLI, err := New(Options{Bin: f.env.Bin, PulumiHome: f.env.Home, SkipVersionCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	viaCLI.noStateRead = true
	r := f.request(OpPreview)
	r.StackExists = true
	res, err := viaCLI.Run(ctx, r)
	if err != nil {
		t.Fatalf("preview: %v\n%s", err, f.log)
	}
	if diff := cmp.Diff(res.Outputs, fromState.Outputs); diff != "" {
		t.Errorf("outputs read from the state differ from the CLI's (-cli +state):\n%s", diff)
	}
	if got := fromState.Outputs["wrapped"]; !got.Secret || got.Value == nil {
		t.Errorf("output wrapped = %+v; want a secret with its value", got)
	}
}

// nestedSecretProgram has a secret, an object holding a secret, and a plain output.
const nestedSecretProgram = `name: nested
runtime: yaml
resources:
  token:
    type: stackwright-testing:index:Random
    properties:
      length: 12
outputs:
  token: ${token.result}
  wrapped:
    inner: ${token.result}
    n: 2
  plain: hello
`
