package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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

// A program naming a provider the engine does not have fails for good, with the plugin
// named: nothing is downloaded, so retrying would only repeat it.
func TestEngine_Run_MissingProviderIsMissingPlugin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `name: needs-kubernetes
runtime: yaml
resources:
  cm:
    type: kubernetes:core/v1:ConfigMap
    properties:
      data:
        a: b
`)
	// The CLI and the language host and nothing else: the real CLI looks for the provider
	// on PATH (where the engine puts its Bin) and in PULUMI_HOME, and finds it in neither.
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"pulumi", "pulumi-language-yaml"} {
		if err := os.Link(filepath.Join(f.env.Bin, b), filepath.Join(bin, b)); err != nil {
			t.Fatalf("failed to link %s: %v", b, err)
		}
	}
	eng, err := New(Options{Bin: bin, PulumiHome: f.env.Home})
	if err != nil {
		t.Fatal(err)
	}
	r := f.request(OpUp)
	r.Env["PATH"] = bin
	_, err = eng.Run(testContext(t), r)
	if got := Classify(err); got != ClassMissingPlugin {
		t.Fatalf("Classify(%v) = %q; want MissingPlugin", err, got)
	}
	if p, ok := FindMissingPlugin(err); !ok || p.Binary != "pulumi-resource-kubernetes" {
		t.Errorf("FindMissingPlugin = %+v, %v; want pulumi-resource-kubernetes", p, ok)
	}
	if msg := Message(err); !strings.Contains(msg, "the engine has no plugin pulumi-resource-kubernetes") {
		t.Errorf("Message = %q; want it to name the missing plugin", msg)
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

// A self-managed backend serves no Pulumi ESC environments: every operation on a stack
// that imports some fails before it changes anything, with the CLI's own reason, and
// for good (BackendUnsupported), since retrying cannot make the backend serve them.
func TestEngine_Run_EnvironmentsOnSelfManagedBackendAreBackendUnsupported(t *testing.T) {
	t.Parallel()
	f := newFixture(t, filesProgram)
	ctx := testContext(t)
	f.mustRun(ctx, f.request(OpUp))
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	// pkg/cmd/pulumi/config's errBackendNoEnvironments; a DIY backend is named after the host.
	reason := "backend " + host + " does not support environments; Pulumi ESC environments require the Pulumi Cloud backend, " +
		"use `pulumi login` without arguments to log into the Pulumi Cloud backend"
	for _, tt := range []struct {
		op   Operation
		want string
	}{
		{OpUp, "failed to update stack dev: getting stack configuration: opening environment: " + reason},
		{OpPreview, "failed to preview stack dev: getting stack configuration: opening environment: " + reason},
		{OpRefresh, "failed to refresh stack dev: getting stack configuration: opening environment: " + reason},
		{OpDrift, "failed to check stack dev for drift: getting stack configuration: opening environment: " + reason},
		{OpDestroy, "failed to destroy stack dev: getting stack configuration: opening environment: " + reason},
	} {
		t.Run(string(tt.op), func(t *testing.T) {
			f.work = f.workDir(filesProgram)
			r := f.request(tt.op)
			r.StackExists = true
			r.Environments = []string{"platform/aws-dev", "defaults"}
			r.Config = map[string]ConfigValue{"greeting": {Value: jsonValue(t, "changed")}}
			_, err := f.eng.Run(ctx, r)
			if got := Classify(err); got != ClassBackendUnsupported {
				t.Fatalf("Classify(%v) = %q; want BackendUnsupported", err, got)
			}
			if msg := Message(err); msg != tt.want {
				t.Errorf("Message = %q; want %q", msg, tt.want)
			}
			f.requireContent("a.txt", "hello")
		})
	}
}
