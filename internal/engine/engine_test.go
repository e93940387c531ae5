package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/opthistory"

	"github.com/stackwright/stackwright/internal/testing/enginetest"
)

// filesProgram manages two files and a secret random string; its greeting comes from config.
const filesProgram = `name: enginetest
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
  b:
    type: stackwright-testing:index:File
    properties:
      path: b.txt
      content: ${greeting} world
  token:
    type: stackwright-testing:index:Random
    properties:
      length: 24
outputs:
  aDigest: ${a.sha256}
  token: ${token.result}
`

// sleepProgram holds the stack's lock while its Sleep resource is created.
const sleepProgram = `name: sleeper
runtime: yaml
resources:
  nap:
    type: stackwright-testing:index:Sleep
    properties:
      seconds: 30
`

// testTimeout bounds every engine test: a hung CLI must fail the test, not the suite.
const testTimeout = 3 * time.Minute

// fixture is one test's engine, isolated Pulumi installation and project work dir.
type fixture struct {
	t    *testing.T
	env  *enginetest.Env
	eng  *Engine
	work string
	log  *Tail
}

func newFixture(t *testing.T, program string) *fixture {
	t.Helper()
	env := enginetest.New(t)
	eng, err := New(Options{Bin: env.Bin, PulumiHome: env.Home})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f := &fixture{t: t, env: env, eng: eng, log: NewTail(64 << 10)}
	f.work = f.workDir(program)
	// As for controller logs in kubetest: the engine's log on failure or on request.
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("STACKWRIGHT_TEST_LOG") != "" {
			t.Logf("engine log:\n%s", f.log)
		}
	})
	return f
}

// workDir writes program into a new directory, as the executor extracts an artifact.
func (f *fixture) workDir(program string) string {
	f.t.Helper()
	dir := f.t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(program), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return dir
}

func (f *fixture) request(op Operation) Request {
	return Request{
		Operation:   op,
		WorkDir:     f.work,
		Stack:       "dev",
		Env:         f.env.EnvVars(),
		CreateStack: true,
		Log:         f.log,
	}
}

// mustRun runs r and fails the test, with the engine's log, if it fails.
func (f *fixture) mustRun(ctx context.Context, r Request) Result {
	f.t.Helper()
	res, err := f.eng.Run(ctx, r)
	if err != nil {
		f.t.Fatalf("%s failed: %v\nmessage: %s\nlog:\n%s", r.Operation, err, Message(err), f.log)
	}
	return res
}

func (f *fixture) file(name string) string { return filepath.Join(f.env.Files, name) }

func (f *fixture) writeFile(name, content string) {
	f.t.Helper()
	if err := os.WriteFile(f.file(name), []byte(content), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) requireContent(name, want string) {
	f.t.Helper()
	got, err := os.ReadFile(f.file(name))
	if err != nil {
		f.t.Fatalf("failed to read %s: %v", name, err)
	}
	if string(got) != want {
		f.t.Fatalf("%s holds %q; want %q", name, got, want)
	}
}

func (f *fixture) requireGone(name string) {
	f.t.Helper()
	if _, err := os.Stat(f.file(name)); !errors.Is(err, fs.ErrNotExist) {
		f.t.Fatalf("stat(%s) = %v; want not exist", name, err)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func jsonValue(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// upFiles brings filesProgram's stack up with the default greeting.
func upFiles(t *testing.T) (*fixture, Result) {
	t.Helper()
	f := newFixture(t, filesProgram)
	res := f.mustRun(testContext(t), f.request(OpUp))
	f.requireContent("a.txt", "hello")
	f.requireContent("b.txt", "hello world")
	return f, res
}

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
	if diff := cmp.Diff(want, res); diff != "" {
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
	if diff := cmp.Diff(want, res); diff != "" {
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
	if diff := cmp.Diff(want, res); diff != "" {
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
		if diff := cmp.Diff(want, res); diff != "" {
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
	if diff := cmp.Diff(want, res); diff != "" {
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
	if diff := cmp.Diff(want, res); diff != "" {
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

// The provider rejects a secret path and quotes it in its error: neither the log nor the
// error may show it.
func TestEngine_Run_SecretInProviderErrorIsMasked(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `name: leak
runtime: yaml
config:
  where:
    type: string
resources:
  a:
    type: stackwright-testing:index:File
    properties:
      path: ${where}
      content: x
`)
	const secret = "/tmp/leaky-s3cr3t-path"
	r := f.request(OpUp)
	r.Config = map[string]ConfigValue{"where": {Value: jsonValue(t, secret), Secret: true}}
	_, err := f.eng.Run(testContext(t), r)
	if err == nil {
		t.Fatal("up with an absolute path succeeded; want the provider to reject it")
	}
	msg := Message(err)
	for what, text := range map[string]string{"log": f.log.String(), "error": err.Error(), "Message": msg} {
		if strings.Contains(text, secret) {
			t.Errorf("the %s holds the secret in clear:\n%s", what, text)
		}
	}
	if !strings.Contains(msg, `path "[secret]" is absolute`) {
		t.Errorf("Message = %q; want the provider's complaint with the path masked", msg)
	}
}

func TestEngine_Run_ProgramErrorIsPermanent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `name: broken
runtime: yaml
resources:
  a:
    type: stackwright-testing:index:File
    properties:
      path: a.txt
      content: ${doesNotExist}
`)
	_, err := f.eng.Run(testContext(t), f.request(OpUp))
	if got := Classify(err); got != ClassPermanent {
		t.Fatalf("Classify(%v) = %q; want Permanent", err, got)
	}
	msg := Message(err)
	const want = `failed to update stack dev: resource, variable, or config value "doesNotExist" not found (on Pulumi.yaml line 8)`
	if msg != want {
		t.Errorf("Message = %q; want %q", msg, want)
	}
	if strings.Contains(msg, "stdout:") || strings.Contains(msg, "\n") {
		t.Errorf("Message = %q; want one paragraph without the CLI's raw output", msg)
	}
}

func TestEngine_Run_MissingStackWithoutCreateIsPermanent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, filesProgram)
	r := f.request(OpUp)
	r.CreateStack = false
	_, err := f.eng.Run(testContext(t), r)
	if got := Classify(err); got != ClassPermanent {
		t.Fatalf("Classify(%v) = %q; want Permanent", err, got)
	}
	const want = "failed to select stack dev: stack dev does not exist and useLocalStackOnly forbids creating it"
	if msg := Message(err); !strings.HasPrefix(msg, want) {
		t.Errorf("Message = %q; want it to start with %q", msg, want)
	}
	f.requireGone("a.txt")
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

// waitForLog waits until a line of the log contains every one of words.
func waitForLog(t *testing.T, log *Tail, words ...string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(log.String(), "\n") {
			all := true
			for _, w := range words {
				all = all && strings.Contains(line, w)
			}
			if all {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no log line with %q within a minute:\n%s", words, log)
}

type runResult struct {
	res Result
	err error
}

func TestEngine_Run_ConcurrentUpsConflict(t *testing.T) {
	t.Parallel()
	f := newFixture(t, sleepProgram)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()

	first := make(chan runResult, 1)
	go func() {
		res, err := f.eng.Run(ctx, f.request(OpUp))
		first <- runResult{res, err}
	}()
	waitForLog(t, f.log, "Sleep", "nap", "creating")

	second := f.request(OpUp)
	second.WorkDir = f.workDir(sleepProgram) // each run has its own work dir, as in the executor
	second.Log = NewTail(8 << 10)
	_, err := f.eng.Run(ctx, second)
	t.Logf("second up: %s", Message(err))
	if got := Classify(err); got != ClassConflict {
		t.Errorf("second up while the first holds the stack: Classify(%v) = %q; want Conflict", err, got)
	}

	cancel()
	if r := <-first; Classify(r.err) != ClassCancelled {
		t.Errorf("first up after cancel: Classify(%v) = %q; want Cancelled", r.err, Classify(r.err))
	}
}

func TestEngine_Run_CancelStopsUpQuickly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, sleepProgram)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()

	done := make(chan runResult, 1)
	go func() {
		res, err := f.eng.Run(ctx, f.request(OpUp))
		done <- runResult{res, err}
	}()
	waitForLog(t, f.log, "Sleep", "nap", "creating")

	start := time.Now()
	cancel()
	var r runResult
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("up still running 20s after cancel; log:\n%s", f.log)
	}
	t.Logf("up returned %v after cancel: %s", time.Since(start), Message(r.err))
	// The Automation API kills the CLI 10s after its SIGINT: returning well before that
	// shows the CLI cancelled the update itself (and released the stack's lock).
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("up returned %v after cancel; want a few seconds", took)
	}
	if got := Classify(r.err); got != ClassCancelled {
		t.Fatalf("Classify(%v) = %q; want Cancelled", r.err, got)
	}
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("errors.Is(%v, context.Canceled) = false; want true", r.err)
	}

	// The cancelled update released its lock: the stack is usable at once.
	if _, err := f.eng.Run(testContext(t), f.request(OpPreview)); err != nil {
		t.Errorf("preview after the cancelled up failed (%s): %v", Classify(err), err)
	}
}

func TestNew_BinNotNamedBin_Fails(t *testing.T) {
	_, err := New(Options{Bin: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "must be named bin") {
		t.Errorf("New with a bin dir not named bin: %v; want an error saying it must be named bin", err)
	}
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
