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
		steps   []step
	}{
		{"plain outputs", plainProgram, []step{
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
		{"secret outputs", filesProgram, []step{
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
	if diff := cmp.Diff(want, res); diff != "" {
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
