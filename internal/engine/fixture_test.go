package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stackwright/stackwright/internal/testing/enginetest"
)

// ignoreSteps leaves Result.Steps out of comparisons that are about something else: the
// engine announces parallel steps in no fixed order (engine_plan_test.go checks them).
var ignoreSteps = cmpopts.IgnoreFields(Result{}, "Steps")

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
