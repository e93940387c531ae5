package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/opthistory"
)

func TestEngine_Run_UpCreatesFilesAndReturnsOutputs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, filesProgram)
	ctx := testContext(t)
	r := f.request(OpUp)
	r.Message = `deploy "abc"`
	res := f.mustRun(ctx, r)
	f.requireContent("a.txt", "hello")
	f.requireContent("b.txt", "hello world")

	token, ok := res.Outputs["token"]
	if !ok || !token.Secret {
		t.Fatalf("output token = %+v; want a secret output", token)
	}
	plain, _ := token.Value.(string)
	if len(plain) != 24 {
		t.Errorf("output token = %q; want the 24-character random string", plain)
	}
	want := Result{
		Outputs: map[string]Output{
			"aDigest": {Value: sha256Hex("hello")},
			"token":   {Value: plain, Secret: true},
		},
		Changes: map[string]int{"create": 4},
		Message: "up succeeded: 4 created",
	}
	if diff := cmp.Diff(want, res, ignoreSteps); diff != "" {
		t.Errorf("up result (-want +got):\n%s", diff)
	}
	if strings.Contains(f.log.String(), plain) {
		t.Errorf("the log holds the secret output in clear:\n%s", f.log)
	}
	if !strings.Contains(f.log.String(), "[secret]") {
		t.Errorf("the log does not show the secret output as [secret]; is it the engine's output?\n%s", f.log)
	}

	stack, err := auto.SelectStackLocalSource(ctx, "dev", f.work, f.env.WorkspaceOptions(f.work)...)
	if err != nil {
		t.Fatal(err)
	}
	history, err := stack.History(ctx, 1, 1, opthistory.ShowSecrets(false))
	if err != nil || len(history) != 1 {
		t.Fatalf("history = %v, %v; want the update", history, err)
	}
	if got := history[0].Message; got != r.Message {
		t.Errorf("recorded update message = %q; want %q", got, r.Message)
	}
}

func TestEngine_Run_PreviewAfterUpReportsOnlySame(t *testing.T) {
	t.Parallel()
	f, up := upFiles(t)

	res := f.mustRun(testContext(t), f.request(OpPreview))
	want := Result{
		Outputs: up.Outputs,
		Changes: map[string]int{"same": 4},
		Message: "preview succeeded: 4 unchanged",
	}
	if diff := cmp.Diff(want, res, ignoreSteps); diff != "" {
		t.Errorf("preview result (-want +got):\n%s", diff)
	}
}

func TestEngine_Run_PreviewOfNewStackReportsCreatesAndChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, filesProgram)
	res := f.mustRun(testContext(t), f.request(OpPreview))
	want := Result{
		Outputs: map[string]Output{},
		Changes: map[string]int{"create": 4},
		Message: "preview succeeded: 4 to create",
	}
	if diff := cmp.Diff(want, res, ignoreSteps); diff != "" {
		t.Errorf("preview result (-want +got):\n%s", diff)
	}
	f.requireGone("a.txt")
}

func TestEngine_Run_DriftReportsHandEditAndChangesNothing(t *testing.T) {
	t.Parallel()
	f, up := upFiles(t)
	ctx := testContext(t)
	f.writeFile("a.txt", "edited by hand")

	for i := range 2 { // a second check finds the same drift: the first adopted nothing
		res := f.mustRun(ctx, f.request(OpDrift))
		want := Result{
			Outputs: up.Outputs,
			Changes: map[string]int{"update": 1, "same": 3},
			Message: "drift detected: 1 to update, 3 unchanged",
		}
		if diff := cmp.Diff(want, res, ignoreSteps); diff != "" {
			t.Errorf("drift check %d (-want +got):\n%s", i+1, diff)
		}
	}
	f.requireContent("a.txt", "edited by hand")
}

func TestEngine_Run_RefreshAdoptsHandEdits(t *testing.T) {
	t.Parallel()
	f, up := upFiles(t)
	ctx := testContext(t)
	f.writeFile("a.txt", "edited by hand")
	if err := os.Remove(f.file("b.txt")); err != nil {
		t.Fatal(err)
	}

	res := f.mustRun(ctx, f.request(OpRefresh))
	want := Result{
		// A refresh does not run the program, so the outputs stay those of the last up.
		Outputs: up.Outputs,
		Changes: map[string]int{"update": 1, "delete": 1, "same": 2},
		Message: "refresh succeeded: 1 updated, 1 deleted, 2 unchanged",
	}
	if diff := cmp.Diff(want, res, ignoreSteps); diff != "" {
		t.Errorf("refresh result (-want +got):\n%s", diff)
	}
	f.requireContent("a.txt", "edited by hand")

	drift := f.mustRun(ctx, f.request(OpDrift))
	if HasChanges(drift.Changes) {
		t.Errorf("drift check after refresh = %v; want no changes", drift.Changes)
	}
}

func TestEngine_Run_DestroyRemovesFilesAndStack(t *testing.T) {
	t.Parallel()
	f, _ := upFiles(t)
	ctx := testContext(t)

	r := f.request(OpDestroy)
	r.RemoveStack = true
	res := f.mustRun(ctx, r)
	want := Result{
		Outputs: map[string]Output{},
		Changes: map[string]int{"delete": 4},
		Message: "destroy succeeded: 4 deleted; stack removed",
	}
	if diff := cmp.Diff(want, res, ignoreSteps); diff != "" {
		t.Errorf("destroy result (-want +got):\n%s", diff)
	}
	f.requireGone("a.txt")
	f.requireGone("b.txt")

	sel := f.request(OpPreview)
	sel.CreateStack = false
	_, err := f.eng.Run(ctx, sel)
	if got := Classify(err); got != ClassPermanent {
		t.Fatalf("selecting the removed stack: Classify(%v) = %q; want Permanent", err, got)
	}
	if msg := Message(err); !strings.Contains(msg, "stack dev does not exist") {
		t.Errorf("Message = %q; want it to say the stack does not exist", msg)
	}
}

func TestEngine_Run_ExpectNoChangesWithRefreshFailsOnDriftAndChangesNothing(t *testing.T) {
	t.Parallel()
	f, _ := upFiles(t)
	ctx := testContext(t)
	f.writeFile("a.txt", "edited by hand")

	r := f.request(OpUp)
	r.Refresh = true
	r.ExpectNoChanges = true
	_, err := f.eng.Run(ctx, r)
	if got := Classify(err); got != ClassPermanent {
		t.Fatalf("Classify(%v) = %q; want Permanent", err, got)
	}
	if msg := Message(err); !strings.Contains(msg, "expectNoRefreshChanges") {
		t.Errorf("Message = %q; want it to name expectNoRefreshChanges", msg)
	}
	f.requireContent("a.txt", "edited by hand")
	drift := f.mustRun(ctx, f.request(OpDrift))
	if drift.Changes["update"] != 1 {
		t.Errorf("drift check after the failed up = %v; want the hand edit still unadopted", drift.Changes)
	}
}

func TestEngine_Run_ExpectNoChangesWithRefreshSucceedsWithoutDrift(t *testing.T) {
	t.Parallel()
	f, _ := upFiles(t)
	r := f.request(OpUp)
	r.Refresh = true
	r.ExpectNoChanges = true
	r.Config = map[string]ConfigValue{"greeting": {Value: json.RawMessage(`"bye"`)}}
	res := f.mustRun(testContext(t), r)
	if diff := cmp.Diff(map[string]int{"update": 2, "same": 2}, res.Changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	f.requireContent("a.txt", "bye")
}

// Without Refresh, ExpectNoChanges is the CLI's `up --expect-no-changes`, which judges the
// update after applying it: the run fails, but the change is made.
func TestEngine_Run_ExpectNoChangesWithoutRefreshFailsAfterApplying(t *testing.T) {
	t.Parallel()
	f, _ := upFiles(t)
	r := f.request(OpUp)
	r.ExpectNoChanges = true
	r.Config = map[string]ConfigValue{"greeting": {Value: json.RawMessage(`"bye"`)}}
	_, err := f.eng.Run(testContext(t), r)
	if got := Classify(err); got != ClassPermanent {
		t.Fatalf("Classify(%v) = %q; want Permanent", err, got)
	}
	const want = "failed to update stack dev: the update changed resources and ExpectNoChanges forbids it: " +
		"no changes were expected for update but changes were proposed"
	if msg := Message(err); msg != want {
		t.Errorf("Message = %q; want %q", msg, want)
	}
	f.requireContent("a.txt", "bye")
}

func TestEngine_Run_TargetsLimitTheUpdate(t *testing.T) {
	t.Parallel()
	f, _ := upFiles(t)
	r := f.request(OpUp)
	r.Config = map[string]ConfigValue{"greeting": {Value: json.RawMessage(`"bye"`)}}
	r.Targets = []string{"urn:pulumi:dev::enginetest::stackwright-testing:index:File::a"}
	res := f.mustRun(testContext(t), r)
	if res.Changes["update"] != 1 {
		t.Errorf("changes = %v; want exactly the targeted file updated", res.Changes)
	}
	f.requireContent("a.txt", "bye")
	f.requireContent("b.txt", "hello world")
}

func TestNew_BinNotNamedBin_Fails(t *testing.T) {
	_, err := New(Options{Bin: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "must be named bin") {
		t.Errorf("New with a bin dir not named bin: %v; want an error saying it must be named bin", err)
	}
}

// With RunProgram the destroy evaluates the program, so a program that no longer
// evaluates stops it; without, the destroy works from the state alone.
func TestEngine_Run_DestroyRunsTheProgramOnlyWithRunProgram(t *testing.T) {
	t.Parallel()
	f, _ := upFiles(t)
	ctx := testContext(t)
	broken := strings.Replace(filesProgram, "content: ${greeting}\n", "content: ${undefinedVariable}\n", 1)
	if err := os.WriteFile(filepath.Join(f.work, "Pulumi.yaml"), []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}

	r := f.request(OpDestroy)
	r.RunProgram = true
	if _, err := f.eng.Run(ctx, r); err == nil || !strings.Contains(Message(err), "undefinedVariable") {
		t.Fatalf("destroy with RunProgram of a broken program: err = %v (message %q); want it to fail on the program", err, Message(err))
	}
	f.requireContent("a.txt", "hello")

	r.RunProgram = false
	f.mustRun(ctx, r)
	f.requireGone("a.txt")
}

// Replace re-creates a resource whose inputs did not change, in a preview as in an up.
func TestEngine_Run_ReplaceRecreatesUnchangedResources(t *testing.T) {
	t.Parallel()
	f, _ := upFiles(t)
	ctx := testContext(t)
	const urn = "urn:pulumi:dev::enginetest::stackwright-testing:index:File::a"
	for _, op := range []Operation{OpPreview, OpUp} {
		r := f.request(op)
		r.Replace = []string{urn}
		res := f.mustRun(ctx, r)
		if res.Changes["replace"] != 1 {
			t.Errorf("%s with Replace: changes = %v; want the unchanged file replaced", op, res.Changes)
		}
	}
}

// flakyProgram's flaky always fails at once, while gate sleeps; a depends on gate only.
// Once flaky fails, an up stops starting steps, so a is never created, unless it goes on
// past the failure.
const flakyProgram = `name: enginetest
runtime: yaml
resources:
  flaky:
    type: stackwright-testing:index:Flaky
    properties:
      failures: 1000000
      counterFile: flaky.count
  gate:
    type: stackwright-testing:index:Sleep
    properties:
      seconds: 2
  a:
    type: stackwright-testing:index:File
    properties:
      path: a.txt
      content: independent
    options:
      dependsOn:
        - ${gate}
`

// ContinueOnError lets an up create what does not depend on a failed resource; the up
// still fails. Without it the first failure ends the update.
func TestEngine_Run_ContinueOnErrorGoesPastAFailedResource(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	for _, tc := range []struct {
		name string
		goOn bool
	}{{"stops", false}, {"continues", true}} {
		f := newFixture(t, flakyProgram)
		r := f.request(OpUp)
		r.Parallel, r.ContinueOnError = 4, tc.goOn
		if _, err := f.eng.Run(ctx, r); err == nil || !strings.Contains(Message(err), "induced failure") {
			t.Fatalf("%s: up with a resource that always fails: err = %v (message %q); want the induced failure", tc.name, err, Message(err))
		}
		if tc.goOn {
			f.requireContent("a.txt", "independent")
		} else {
			f.requireGone("a.txt")
		}
	}
}
