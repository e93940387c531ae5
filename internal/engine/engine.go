package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/blang/semver"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"

	"github.com/stackwright/stackwright/internal/version"
)

// Operation is what one Run does to a stack.
type Operation string

const (
	// OpUp updates the stack to match the program.
	OpUp Operation = "up"
	// OpPreview reports what an up would change, changing nothing.
	OpPreview Operation = "preview"
	// OpRefresh adopts the real state of the stack's resources into its state.
	OpRefresh Operation = "refresh"
	// OpDestroy deletes the stack's resources (and, with RemoveStack, the stack).
	OpDestroy Operation = "destroy"
	// OpDrift is a refresh preview: it reports how the resources differ from the state and
	// changes nothing, neither the resources nor the state.
	OpDrift Operation = "drift"
)

// ConfigValue is one stack config value. Value is JSON: a JSON string sets a plain string
// value; any other JSON (number, bool, object, list) is stored structured, so that the
// program sees 3, true or {"a":1} rather than strings. See configValue for what Pulumi does
// with top-level scalars.
type ConfigValue struct {
	Value  json.RawMessage
	Secret bool
}

// Request is one engine operation on one stack.
type Request struct {
	Operation Operation
	// WorkDir holds the project (Pulumi.yaml); Run writes Pulumi.<stack>.yaml there. Run
	// expects a directory freshly prepared from the artifact: it sets the keys of Config
	// but does not remove keys an earlier run may have written there.
	WorkDir string
	// Stack is the stack name as the Stack spec gives it ("dev" or "org/project/dev").
	Stack string
	// SecretsProvider is used when Run creates the stack; "" is the backend's default
	// (passphrase for DIY backends). An existing stack keeps its provider: Run makes the
	// CLI fall back to the provider recorded in the stack's state when WorkDir's settings
	// file does not name one.
	SecretsProvider string
	// Config is the full set of values Run sets; keys it does not list keep the values of
	// the project's own stack settings file. Keys without a namespace ("replicas") belong
	// to the project, as on the CLI.
	Config map[string]ConfigValue
	// Environments are Pulumi ESC environments the stack imports, in order, named as given
	// ("project/env", or "env" of the default project). Run appends them to the import list
	// of the stack settings file, after any the project's own file imports, which is what
	// `pulumi config env add` does; the CLI opens them through the backend at every
	// operation, and their pulumiConfig values are the stack's config where Config and the
	// file do not set a key. Only Pulumi Cloud serves environments: on a self-managed
	// backend every operation fails with ClassBackendUnsupported.
	Environments []string
	// Env is added to the environment of every pulumi invocation of this run (backend URL,
	// access token, passphrase, envRefs). Values of variables whose names look like
	// credentials are masked in logs and errors.
	Env map[string]string
	// CreateStack creates a missing stack; false only selects it, and a missing stack is a
	// Permanent error (the opposite of PKO's useLocalStackOnly: the caller maps it).
	CreateStack bool
	// StackExists is the caller's belief that the stack exists (it has seen an operation on
	// it succeed). Run then starts the operation straight away, one CLI process in all, and
	// creates the stack only if the CLI says it is missing after all. Otherwise, with
	// CreateStack, Run creates the stack first (it tolerates finding it there).
	StackExists bool
	// Refresh refreshes the state before an up, preview or destroy.
	Refresh bool
	// ExpectNoChanges (PKO expectNoRefreshChanges) makes an up fail instead of changing
	// anything unexpected. With Refresh, the refresh is checked first as a refresh preview
	// with --expect-no-changes, so drift stops the run before anything (state included)
	// changes and the update itself may then apply the program's changes. Without Refresh,
	// the update runs with --expect-no-changes, which the CLI checks after applying it. For
	// preview and refresh it is passed to the CLI as is.
	ExpectNoChanges bool
	// Targets limits the operation to these URNs.
	Targets []string
	// TargetDependents extends Targets to the resources that depend on them.
	TargetDependents bool
	// Replace lists URNs an up or preview replaces even if they did not change.
	Replace []string
	// Parallel bounds the resource operations run at once; 0 leaves the CLI's default.
	Parallel int32
	// ContinueOnError makes an up or destroy carry on past a failed resource with the
	// resources that do not depend on it; the operation still fails.
	ContinueOnError bool
	// RemoveStack removes the stack from the backend after a successful destroy.
	RemoveStack bool
	// RunProgram (PKO spec.runProgram) runs the program during destroy and during the
	// refresh of refresh, and of up or preview with Refresh, so that providers it
	// configures take part.
	RunProgram bool
	// StaleLockHosts are host-name prefixes of lock holders the caller has proven gone
	// (runner Pods whose Jobs ended). When the operation finds the stack locked by such
	// holders only, Run removes their locks and tries once more; any other lock stays.
	StaleLockHosts []string
	// StaleLocalLocks also counts as gone a lock holder of this host whose pid no longer
	// runs: a pulumi the caller started and lost (killed with a manager that crashed). The
	// caller must never run two operations of one stack at once; a pulumi of this host
	// that still runs (a person's) keeps its lock.
	StaleLocalLocks bool
	// Message is recorded with the update in the backend (up, refresh, destroy).
	Message string
	// RunID identifies this run in the backend's history: it is appended to Message as
	// "[run <RunID>]", so that a later run can tell whether this one completed.
	RunID string
	// Recover lists the RunIDs of earlier runs of this same up that their callers lost
	// before they reported (a crash). When the backend's latest history entry is one of
	// them, and it succeeded, Run does not apply the program again: it reports that run
	// (Result.Recovered) with the stack's current outputs. Any other entry, or none, and
	// the up runs.
	Recover []string
	// SavePlan makes a preview return the update plan it computed, in Result.Plan, so that
	// a later up can be held to exactly the previewed changes.
	SavePlan bool
	// Plan is an update plan a SavePlan preview returned. An up given one performs only the
	// operations the plan allows; at the first it does not (the program, its config or the
	// real resources moved since the preview) it fails with ClassPlanInvalid.
	Plan []byte `json:"plan,omitempty"`
	// Log receives the engine's progress output, secrets masked; nil discards it.
	Log io.Writer `json:"-"`
}

// Output is one stack output. A secret output keeps its value here: callers decide where
// it may go (a Secret, never a status).
type Output struct {
	Value  any
	Secret bool
}

// Result is what a successful Run reports.
type Result struct {
	// Outputs are the stack's outputs after up or refresh, its current outputs for preview
	// and drift, and empty after destroy.
	Outputs map[string]Output
	// Changes counts resources by operation ("create", "update", "delete", "replace",
	// "same", ...): from the update summary for up, refresh and destroy, from the change
	// summary for preview and drift.
	Changes map[string]int
	// Permalink is the backend's link to the update; "" for DIY backends.
	Permalink string
	// Message is a one-line summary, e.g. "up succeeded: 2 created, 1 updated".
	Message string
	// Steps are the resource operations of the run, unchanged resources left out: those a
	// preview plans, or those an operation performed.
	Steps []Step
	// Plan is the update plan of a SavePlan preview: JSON, with secret values encrypted by
	// the stack's secrets provider.
	Plan []byte
	// PendingOperations are the operations an interrupted update left pending in the
	// state, as an up warned about them: "<urn> (interrupted while creating)". The up went
	// ahead; Pulumi keeps pending creates until a person clears or imports them.
	PendingOperations []string
	// Recovered is set when an up with Recover found the lost run it names complete in
	// the backend's history, and ran nothing itself.
	Recovered *Recovered
	// HealedLocks names the holders of the stale locks the run removed before it went
	// ahead ("<host> (pid N)"): forcing a lock is worth a line in the Update's message,
	// not only in a log tail that a long run pushes it out of.
	HealedLocks []string
}

// Recovered is a lost run that the backend's history shows succeeded.
type Recovered struct {
	// RunID is the lost run's, as Request.Recover gave it.
	RunID string `json:"runID"`
	// Version is the stack version the run wrote; 0 from DIY backends, which do not number
	// them.
	Version int64 `json:"version,omitempty"`
}

// Step is one resource operation of a run, as the engine's event log announces it. It
// carries no secret value: the log has secrets as "[secret]" placeholders.
type Step struct {
	// Op is the operation: create, update, replace, delete, import, refresh, read, ...
	Op string `json:"op"`
	// URN identifies the resource.
	URN string `json:"urn"`
	// Type is the resource's type token, e.g. "random:index/randomPet:RandomPet".
	Type string `json:"type"`
	// Changed are the paths of the properties the operation changes, as the provider's diff
	// names them; empty for creates and deletes.
	Changed []string `json:"changed,omitempty"`
	// Replacing are the properties whose change forces a replacement.
	Replacing []string `json:"replacing,omitempty"`
	// Protected is whether the resource is protected (its old state, or else its new one).
	Protected bool `json:"protected,omitempty"`
	// Inputs are the resource's new inputs, and OldInputs those of its state (nil for a
	// create), secrets as "[secret]" placeholders: what policies judge.
	Inputs    map[string]any `json:"inputs,omitempty"`
	OldInputs map[string]any `json:"oldInputs,omitempty"`
}

// Options configure an Engine for all its runs.
type Options struct {
	// Bin holds pulumi, and the language hosts and providers found on PATH as ambient
	// plugins. Its base name must be "bin": the Automation API runs <parent>/bin/pulumi.
	// "" uses the pulumi found on the process's PATH.
	Bin string
	// PulumiHome is PULUMI_HOME for every run (plugin cache, workspace state); "" is the
	// CLI's default (~/.pulumi).
	PulumiHome string
	// Env is the base environment of every run (e.g. PULUMI_SKIP_UPDATE_CHECK,
	// PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION); Request.Env overrides it.
	Env map[string]string
	// InheritEnv names the variables of this process's environment that runs see; nil
	// means DefaultInheritEnv. Nothing else of it reaches a program.
	InheritEnv []string
	// OnRun, when set, is called after every Run with its operation, whether it succeeded
	// and the CPU of the pulumi processes it started, language hosts and providers
	// included (for metrics).
	OnRun func(op Operation, ok bool, cpu time.Duration)
	// OnStart, when set, is called as every Run begins, with its operation (for metrics:
	// a run that never ends is still counted).
	OnStart func(op Operation)
	// OnStaleLockHealed, when set, is called when a run removed stale locks (for metrics).
	OnStaleLockHealed func()
	// SkipVersionCheck skips `pulumi version`, which New otherwise runs to check that the CLI
	// is recent enough. It is for short-lived engines that run one operation (runner Pods),
	// where the check would be one more process per update; Version is then "".
	SkipVersionCheck bool
}

// Engine runs Pulumi operations with one version-checked CLI. It is safe for concurrent
// use; runs on the same stack exclude each other through the backend's lock.
type Engine struct {
	cmd     command
	onRun   func(op Operation, ok bool, cpu time.Duration)
	onStart func(op Operation)
	onHeal  func()
	bin     string
	home    string
	env     map[string]string
	ciphers *cipherCache
	// crypters are derived passphrase keys; noStateRead makes runs ask the CLI for secret
	// outputs even where they could read the state (tests of that path).
	crypters    *crypterCache
	noStateRead bool
}

// New locates the pulumi CLI and, unless told not to, checks that the Automation API
// supports its version.
func New(o Options) (*Engine, error) {
	e := &Engine{home: o.PulumiHome, env: maps.Clone(o.Env), ciphers: newCipherCache(), crypters: &crypterCache{}, onRun: o.OnRun, onStart: o.OnStart, onHeal: o.OnStaleLockHealed}
	opts := &auto.PulumiCommandOptions{}
	if o.Bin != "" {
		bin, err := filepath.Abs(o.Bin)
		if err != nil {
			return nil, fmt.Errorf("failed to locate pulumi in %s: %w", o.Bin, err)
		}
		if filepath.Base(bin) != "bin" {
			return nil, fmt.Errorf("failed to locate pulumi in %s: the directory must be named bin, "+
				"because the Automation API runs <root>/bin/pulumi", o.Bin)
		}
		e.bin = bin
		opts.Root = filepath.Dir(bin)
	}
	path := "pulumi"
	if e.bin != "" {
		path = filepath.Join(e.bin, "pulumi")
	}
	path, err := exec.LookPath(path)
	if err != nil {
		return nil, fmt.Errorf("failed to locate pulumi: %w", err)
	}
	c := command{path: path, inherit: o.InheritEnv}
	if !o.SkipVersionCheck {
		checked, err := auto.NewPulumiCommand(opts)
		if err != nil {
			return nil, fmt.Errorf("failed to use the pulumi CLI: %w", err)
		}
		c.version = checked.Version()
	}
	e.cmd = c
	return e, nil
}

// Version is the version of the CLI the engine runs; "" when New did not check it.
func (e *Engine) Version() string {
	if v := e.cmd.Version(); !v.EQ(semver.Version{}) {
		return v.String()
	}
	return ""
}

// Run performs one operation. Its errors are "failed to <verb> <object>: <cause>", scrubbed
// of the request's secrets; Classify says how to retry them and Message summarises them.
func (e *Engine) Run(ctx context.Context, r Request) (Result, error) {
	if e.onStart != nil {
		e.onStart(r.Operation)
	}
	x := &run{
		req:     r,
		cmd:     e.cmd,
		env:     e.environment(r),
		home:    e.home,
		ciphers: e.ciphers,
		onHeal:  e.onHeal,
	}
	if !e.noStateRead {
		x.crypters = e.crypters
	}
	x.scrub = newScrubber(x.secretValues()...)
	x.log = newLogSink(r.Log, x.scrub)
	res, err := x.run(ctx)
	if e.onRun != nil {
		e.onRun(r.Operation, err == nil, x.cpu)
	}
	return res, err
}

// environment is the base Env, then the request's, then what the engine needs regardless.
// The CLI sees only these and the allow-listed variables of this process (command).
func (e *Engine) environment(r Request) map[string]string {
	env := map[string]string{}
	maps.Copy(env, e.env)
	maps.Copy(env, r.Env)
	// A work dir freshly extracted from an artifact has no Pulumi.<stack>.yaml naming the
	// stack's secrets provider (or its passphrase salt). Without this the CLI would make up
	// a new default provider for an existing stack instead of using the one in its state.
	if _, ok := env["PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER"]; !ok {
		env["PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER"] = "true"
	}
	// The CLI turns a truthy PULUMI_SKIP_CONFIRMATIONS into --yes, which `refresh
	// --preview-only` (drift checks) rejects; the Automation API passes --yes wherever it
	// is needed anyway.
	env["PULUMI_SKIP_CONFIRMATIONS"] = "false"
	if e.bin != "" {
		path, ok := env["PATH"]
		if !ok {
			path = os.Getenv("PATH")
		}
		switch {
		case path == "":
			// Not "bin:": an empty PATH element is the working directory.
			path = e.bin
		case path != e.bin && !strings.HasPrefix(path, e.bin+string(os.PathListSeparator)):
			path = e.bin + string(os.PathListSeparator) + path
		}
		env["PATH"] = path
	}
	return env
}

// run is the state of one Run.
type run struct {
	req Request
	cmd command
	cpu time.Duration // of the CLI processes so far
	// onHeal is Options.OnStaleLockHealed.
	onHeal func()
	// healed are the holders of the stale locks this run removed (Result.HealedLocks).
	healed []string
	env    map[string]string
	home   string
	scrub  *scrubber
	log    *logSink
	// ciphers is the engine's cache of secret config ciphertexts, under stackKey for this
	// run's stack; usedCache says configure wrote some, noCache forbids it.
	ciphers            *cipherCache
	stackKey           string
	usedCache, noCache bool
	// envAdded says the settings file imports Request.Environments already: configure runs
	// again when the stack had to be created, and must not import them twice.
	envAdded bool
	// project is the project's name; crypters, when set, lets the run read secret outputs
	// from a file:// backend's state (see stateSecrets).
	project  string
	crypters *crypterCache
}

// fail builds Run's error. A cancelled context overrides every other class: whatever the
// CLI said after its SIGINT is a consequence of the cancellation.
func (x *run) fail(ctx context.Context, action, hint string, class Class, cause error) error {
	err := &runError{action: action, hint: hint, class: class, cause: cause, scrub: x.scrub}
	if ctx.Err() != nil {
		err.class = ClassCancelled
		err.ctx = ctx.Err()
		if err.hint == "" {
			err.hint = "cancelled: " + context.Cause(ctx).Error()
		}
	}
	return err
}

func (x *run) run(ctx context.Context) (Result, error) {
	r := x.req
	name := r.Stack
	if err := r.validate(); err != nil {
		return Result{}, x.fail(ctx, fmt.Sprintf("failed to run %q on stack %s", r.Operation, name), "", ClassPermanent, err)
	}
	values, err := parseConfig(r.Config)
	if err != nil {
		return Result{}, x.fail(ctx, "failed to set config of stack "+name, "", ClassPermanent, err)
	}

	// The workspace only reads and writes the project's files, in this process; every CLI
	// call is Run's own, so that each costs exactly the process it needs.
	opts := []auto.LocalWorkspaceOption{
		auto.WorkDir(r.WorkDir),
		auto.Pulumi(x.cmd),
		auto.EnvVars(x.env),
	}
	if x.home != "" {
		opts = append(opts, auto.PulumiHome(x.home))
	}
	ws, err := auto.NewLocalWorkspace(ctx, opts...)
	if err != nil {
		return Result{}, x.fail(ctx, "failed to prepare workspace in "+r.WorkDir, "", "", err)
	}
	project, err := ws.ProjectSettings(ctx)
	if err != nil {
		return Result{}, x.fail(ctx, "failed to read project in "+r.WorkDir, "", ClassPermanent, err)
	}

	x.project = project.Name.String()
	x.stackKey = x.ciphers.stackKey(x.project, name, r.SecretsProvider, x.env)
	created := false
	if r.CreateStack && !r.StackExists {
		if err := x.createStack(ctx); err != nil {
			return Result{}, err
		}
		created = true
	}
	res, err := x.configureAndOperate(ctx, ws, values)
	if cause, missing := missingStack(err); missing {
		switch {
		case !r.CreateStack:
			return Result{}, x.fail(ctx, "failed to select stack "+name,
				"stack "+name+" does not exist and useLocalStackOnly forbids creating it", ClassPermanent, cause)
		case !created:
			// The caller believed the stack existed; it does not (any more).
			if err := x.createStack(ctx); err != nil {
				return Result{}, err
			}
			res, err = x.configureAndOperate(ctx, ws, values)
		}
	}
	if err != nil && x.usedCache && decryptFailure(err) {
		// Cached ciphertexts of another secrets manager (the stack was recreated elsewhere).
		x.log.println("the stack's secrets manager did not decrypt remembered secret config; setting it again")
		x.ciphers.forget(x.stackKey)
		x.noCache = true
		res, err = x.configureAndOperate(ctx, ws, values)
	}
	if err == nil && r.Operation == OpDestroy && r.RemoveStack {
		x.ciphers.forget(x.stackKey)
	}
	if err != nil && x.healStaleLock(ctx, err) {
		res, err = x.operate(ctx)
	}
	res.HealedLocks = x.healed
	return res, err
}

func (x *run) configureAndOperate(ctx context.Context, ws auto.Workspace, values []configEntry) (Result, error) {
	if err := x.configure(ctx, ws, x.req.Stack, x.project, values); err != nil {
		return Result{}, err
	}
	return x.operate(ctx)
}

func (x *run) operate(ctx context.Context) (Result, error) {
	switch x.req.Operation {
	case OpUp:
		return x.up(ctx)
	case OpPreview:
		return x.preview(ctx)
	case OpRefresh:
		return x.refresh(ctx)
	case OpDestroy:
		return x.destroy(ctx)
	default: // OpDrift; validate rejected anything else
		return x.drift(ctx)
	}
}

func (r Request) validate() error {
	switch {
	case !slices.Contains([]Operation{OpUp, OpPreview, OpRefresh, OpDestroy, OpDrift}, r.Operation):
		return fmt.Errorf("unknown operation %q", r.Operation)
	case r.WorkDir == "":
		return errors.New("no work dir")
	case r.Stack == "":
		return errors.New("no stack name")
	case r.SavePlan && r.Operation != OpPreview:
		return errors.New("only a preview saves a plan")
	case len(r.Plan) > 0 && r.Operation != OpUp:
		return errors.New("only an up applies a plan")
	case slices.Contains(r.Environments, ""):
		return errors.New("an environment name is empty")
	}
	return nil
}

// secretValues are the plaintexts the scrubber masks: secret config values (as the
// program sees them and as JSON) and credentials in Env.
func (x *run) secretValues() []string {
	var out []string
	for _, v := range x.req.Config {
		if !v.Secret {
			continue
		}
		out = append(out, string(v.Value))
		if s, err := secretPlaintext(v.Value); err == nil {
			out = append(out, s)
		}
	}
	for k, v := range x.env {
		// A switch is no credential, though its name may say SECRET: the engine's own
		// PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER=true masked every "true" in every log.
		if strings.EqualFold(v, "true") || strings.EqualFold(v, "false") {
			continue
		}
		upper := strings.ToUpper(k)
		for _, w := range secretEnvWords {
			if strings.Contains(upper, w) {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

// createStack creates the stack, with the request's secrets provider, and succeeds if it
// exists already (another run may have created it since the caller looked).
func (x *run) createStack(ctx context.Context) error {
	name := x.req.Stack
	args := []string{"stack", "init", "--stack", name, "--no-select"}
	if x.req.SecretsProvider != "" {
		args = append(args, "--secrets-provider", x.req.SecretsProvider)
	}
	create := func() error {
		_, err := x.cli(ctx, "create stack "+name, nil, false, args...)
		switch {
		case err == nil:
			// A new stack has a new secrets manager: no remembered ciphertext fits it.
			x.ciphers.forget(x.stackKey)
		case !stackExistsErr.MatchString(err.Error()):
			return x.fail(ctx, "failed to create stack "+name, "", "", err)
		}
		return nil
	}
	// A self-managed backend refuses to create a stack that exists and is locked.
	err := create()
	if err != nil && x.healStaleLock(ctx, err) {
		err = create()
	}
	return err
}

func (x *run) userAgent() string { return "stackwright/" + version.Version }
