package engine

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/stackwright/stackwright/internal/clip"
)

// Class says how a failed run should be retried.
type Class string

const (
	// ClassTransient failures may succeed unchanged after a backoff.
	ClassTransient Class = "Transient"
	// ClassConflict means another update holds the stack; retry once it is released.
	ClassConflict Class = "Conflict"
	// ClassPermanent failures repeat until the program, config or stack changes.
	ClassPermanent Class = "Permanent"
	// ClassCancelled runs were stopped by their context (cancel or deadline).
	ClassCancelled Class = "Cancelled"
	// ClassPlanInvalid: an up held to a plan met an operation the plan does not allow. The
	// plan is stale; a new preview makes a new one.
	ClassPlanInvalid Class = "PlanInvalid"
	// ClassMissingPlugin: the program needs a plugin (a provider, a language host) that
	// the engine does not have. Plugins are never downloaded at run time, so nothing
	// changes until someone provides it: retrying only repeats the failure.
	ClassMissingPlugin Class = "MissingPlugin"
	// ClassBackendUnsupported: the stack asks for something its backend does not offer
	// (Pulumi ESC environments on a self-managed backend). Every operation fails the same
	// way until the stack or its backend changes: retrying only repeats the failure.
	ClassBackendUnsupported Class = "BackendUnsupported"
)

// maxMessage bounds Message: it ends up in a Kubernetes condition message.
const maxMessage = 1024

// runError is what Run returns: "failed to <verb> <object>: <cause>", with the cause's text
// scrubbed of the run's secrets. A CLI error embeds the CLI's whole stdout and stderr, which
// is where a provider or program may echo a secret.
type runError struct {
	action string // "failed to select stack dev"
	hint   string // what it means for the operator, when the CLI's words are not enough
	class  Class  // "" lets Classify decide from the cause
	cause  error  // usually a cliError, which carries the CLI's stdout and stderr
	ctx    error  // the context's error when the run was cancelled
	scrub  *scrubber
}

func (e *runError) Error() string {
	var b strings.Builder
	b.WriteString(e.action)
	if e.hint != "" {
		b.WriteString(": ")
		b.WriteString(e.hint)
	}
	if e.cause != nil {
		b.WriteString(": ")
		b.WriteString(e.cause.Error())
	}
	return e.scrub.String(b.String())
}

func (e *runError) Unwrap() []error {
	var errs []error
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	if e.ctx != nil {
		errs = append(errs, e.ctx)
	}
	return errs
}

// Markers are matched case-insensitively against an error's whole text, which for CLI
// failures includes the CLI's stdout (resource diagnostics) and stderr.
var (
	// conflictMarkers: another update holds the stack. The first two come from the Pulumi
	// Cloud backend (HTTP 409), the last from DIY backends' lock files.
	conflictMarkers = []string{
		"[409] conflict",
		"another update is currently in progress",
		"already has an update in progress",
		"the stack is currently locked by",
	}
	// planMarkers: the engine refused a step an update plan does not allow
	// (pkg/resource/deploy's step generator and executor).
	planMarkers = []string{
		"violates plan",
		"is not allowed by the plan",
		"no plan for resource",
		"expected a new resource plan",
	}
	// permanentMarkers win over transient ones: these failures need a human whatever else
	// the output mentions (a program error may well quote a URL or a timeout).
	permanentMarkers = []string{
		"no changes were expected", // --expect-no-changes (NoChangesExpectedError)
		"no stack named",           // a missing stack that may not be created
		// Programs that do not compile or fail at run time, as the Automation API
		// recognises them (IsCompilationError, IsRuntimeError).
		"build failed.",
		": syntax error:",
		": undefined:",
		"unable to compile typescript",
		"failed with an unhandled exception:",
		"panic: runtime error:",
		"an unhandled error occurred:",
		"validating stack config",
		"missing required configuration variable",
		"invalid configuration key",
		"incorrect passphrase",
		"passphrase must be set",
	}
	// transientMarkers: the network or a backend/cloud API that may answer next time.
	transientMarkers = []string{
		"dial tcp",
		"i/o timeout",
		"connection reset",
		"connection refused",
		"broken pipe",
		"tls handshake timeout",
		"no such host",
		"temporary failure in name resolution",
		"client.timeout exceeded",
		"context deadline exceeded", // an HTTP client's own timeout; our ctx is checked first
		"too many requests",
		"rate exceeded",
		"throttl",
		"internal server error",
		"bad gateway",
		"service unavailable",
		"gateway timeout",
		"backend is unavailable",
	}
	// backendUnsupportedMarkers: the CLI's refusal to open a stack's environments on a
	// backend that is not Pulumi Cloud (pkg/cmd/pulumi/config's errBackendNoEnvironments:
	// "backend <name> does not support environments; Pulumi ESC environments require the
	// Pulumi Cloud backend, ...").
	backendUnsupportedMarkers = []string{
		"does not support environments",
	}
	// statusMarker matches HTTP statuses as the Pulumi service client prints them ("[503]").
	statusMarker = regexp.MustCompile(`\[(429|5\d\d)\]`)
	// pluginSourceDown matches a plugin download that the plugin source (or the manager's
	// plugin cache in front of it) failed for now; it is reported inside a program error.
	pluginSourceDown = regexp.MustCompile(`\b(429|5\d\d) http error fetching plugin`)
	// missingPlugin matches the CLI's words for a plugin it has neither in PULUMI_HOME nor
	// on PATH (sdk/go/common/workspace's MissingError), with the version when one was
	// asked for.
	missingPlugin = regexp.MustCompile(`no (resource|language|analyzer|converter|tool) plugin '([^'\s]+)' found in the workspace(?: at version (v?[0-9][^\s,]*))?`)
	// undownloadable matches the CLI's words for a download the plugin source answered
	// with 404 or 403 (pkg/workspace's InstallPluginError around a downloadError).
	undownloadable = regexp.MustCompile(`Could not automatically download and install (resource|language|analyzer|converter|tool) plugin '([^'\s]+)'(?: at version (v?[0-9][^\s,]*))?,.*?: (?:404|403) HTTP error fetching plugin`)
	// unversioned matches the CLI's refusal to look up the latest version of a plugin
	// whose source is a plain URL, as the plugin cache's is.
	unversioned = regexp.MustCompile(`could not (?:find|get) latest version for (?:provider|plugin) ([a-z0-9-]+): GetLatestVersion is not supported for plugins from http sources`)
)

// Why a MissingPlugin is missing.
const (
	// MissingNotDownloaded: the engine does not download plugins.
	MissingNotDownloaded = ""
	// MissingAtSource: the plugin source said it does not have that plugin or version.
	MissingAtSource = "NotAtSource"
	// MissingVersion: the program names no version, and a download needs one.
	MissingVersion = "NoVersion"
)

// MissingPlugin is a plugin a run needed and the engine did not have.
type MissingPlugin struct {
	// Kind is the plugin's kind: resource (a provider), language, analyzer, ...
	Kind string
	// Binary is the executable the CLI looked for, e.g. pulumi-resource-kubernetes.
	Binary string
	// Version is the version asked for, or "" when any would have done.
	Version string
	// Why is MissingNotDownloaded, MissingAtSource or MissingVersion.
	Why string
}

// FindMissingPlugin returns the plugin err says the engine did not have.
func FindMissingPlugin(err error) (MissingPlugin, bool) {
	if err == nil {
		return MissingPlugin{}, false
	}
	text := ansiEscape.ReplaceAllString(err.Error(), "")
	if m := undownloadable.FindStringSubmatch(text); m != nil {
		return MissingPlugin{Kind: m[1], Binary: m[2], Version: m[3], Why: MissingAtSource}, true
	}
	if m := unversioned.FindStringSubmatch(text); m != nil {
		return MissingPlugin{Kind: "resource", Binary: "pulumi-resource-" + m[1], Why: MissingVersion}, true
	}
	if m := missingPlugin.FindStringSubmatch(text); m != nil {
		return MissingPlugin{Kind: m[1], Binary: m[2], Version: m[3]}, true
	}
	return MissingPlugin{}, false
}

// missingPluginHint is what a person reading a Stack whose program needs p must know:
// where the engine looks for plugins, and what to change so that it finds this one.
func missingPluginHint(p MissingPlugin) string {
	what := p.Binary
	if p.Version != "" {
		what += " " + p.Version
	}
	const bundles = "select a plugin bundle that holds it (the Stack's spec.stackwright.plugins, from the bundles the install offers with --plugin-bundle), or run the Stack in a workspaceTemplate image that has it on its PATH"
	switch p.Why {
	case MissingAtSource:
		return fmt.Sprintf("the engine has no plugin %s and the install's plugin source does not have it either: name a version the source has, or %s; then set the %s annotation to retry",
			what, bundles, reconcileRequestAnnotation)
	case MissingVersion:
		return fmt.Sprintf("the engine has no plugin %s and downloads only plugins whose version the program names: name it (in Pulumi YAML, the resource's options.version), or %s; then set the %s annotation to retry",
			what, bundles, reconcileRequestAnnotation)
	}
	return fmt.Sprintf("the engine has no plugin %s and never downloads one: %s; then set the %s annotation to retry", what, bundles, reconcileRequestAnnotation)
}

// reconcileRequestAnnotation is PKO's pulumi.com/reconciliation-request (api/v1), named
// here so that the engine does not depend on the API package.
const reconcileRequestAnnotation = "pulumi.com/reconciliation-request"

// Classify maps an error from Run to a retry class:
//   - Cancelled: the run's context was cancelled or its deadline passed (Run records this
//     even though the CLI only reports "exit status" after its SIGINT);
//   - PlanInvalid: an up held to a plan met an operation the plan does not allow;
//   - Conflict: the CLI's conflict and lock messages;
//   - MissingPlugin: the CLI found no plugin the program needs (FindMissingPlugin);
//   - BackendUnsupported: the backend cannot serve what the stack asks for (its ESC
//     environments, which only Pulumi Cloud serves);
//   - Transient: network failures, timeouts, HTTP 429/5xx (of the backend or of a plugin
//     download), backend unavailable;
//   - Permanent: program, compilation and runtime errors, invalid config, a missing stack
//     that may not be created, expect-no-changes violations, and anything unrecognised:
//     retrying an unknown failure forever hides it, while Permanent still retries a bounded
//     number of times before the Stack is Stalled with this message.
//
// Classify(nil) is "".
func Classify(err error) Class {
	if err == nil {
		return ""
	}
	var re *runError
	if errors.As(err, &re) && re.class != "" {
		return re.class
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ClassCancelled
	}
	text := strings.ToLower(err.Error())
	if containsAny(text, planMarkers) {
		return ClassPlanInvalid
	}
	if containsAny(text, conflictMarkers) {
		return ClassConflict
	}
	if _, ok := FindMissingPlugin(err); ok {
		return ClassMissingPlugin
	}
	if containsAny(text, backendUnsupportedMarkers) {
		return ClassBackendUnsupported
	}
	if pluginSourceDown.MatchString(text) {
		return ClassTransient
	}
	if containsAny(text, permanentMarkers) {
		return ClassPermanent
	}
	if containsAny(text, transientMarkers) || statusMarker.MatchString(text) {
		return ClassTransient
	}
	return ClassPermanent
}

func containsAny(text string, markers []string) bool {
	for _, m := range markers {
		if strings.Contains(text, m) {
			return true
		}
	}
	return false
}

// genericErrors are the CLI's closing lines that restate that an operation failed; they
// say nothing a condition's reason does not already say.
var genericErrors = map[string]bool{
	"update failed":  true,
	"preview failed": true,
	"refresh failed": true,
	"destroy failed": true,
}

var (
	ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)
	spaces     = regexp.MustCompile(`\s+`)
)

// Message returns a one-paragraph summary of err, at most 1 KiB, fit for a Kubernetes
// condition: what Run was doing, why (when Run knows better than the CLI), and the CLI's
// meaningful "error:" lines instead of its whole output. Errors from Run are already
// scrubbed of the run's secrets, so their Message is too.
func Message(err error) string {
	if err == nil {
		return ""
	}
	var parts []string
	detailsFrom := err.Error()
	var re *runError
	if errors.As(err, &re) {
		parts = append(parts, re.action)
		if re.hint != "" {
			parts = append(parts, re.hint)
		}
		detailsFrom = ""
		if re.cause != nil {
			detailsFrom = re.scrub.String(re.cause.Error())
		}
	}
	if p, ok := FindMissingPlugin(err); ok && (re == nil || !strings.Contains(re.hint, p.Binary)) {
		parts = append(parts, missingPluginHint(p))
	}
	if d := errorLines(detailsFrom); d != "" {
		parts = append(parts, d)
	} else if first := firstLine(detailsFrom); first != "" {
		parts = append(parts, first)
	}
	msg := spaces.ReplaceAllString(strings.Join(parts, ": "), " ")
	return clip.Text(strings.TrimSpace(msg), maxMessage)
}

// errorLines collects the distinct "error: ..." lines of CLI output (resource and program
// diagnostics on stdout, the CLI's own errors on stderr), joined with "; ". Language hosts
// write "Error:" in any case and follow it with where ("on Pulumi.yaml line 8:"), which
// is kept.
func errorLines(text string) string {
	var out, generic []string
	seen := map[string]bool{}
	lines := strings.Split(ansiEscape.ReplaceAllString(text, ""), "\n")
	for i, line := range lines {
		line = outputLine(line)
		if len(line) < len("error:") || !strings.EqualFold(line[:len("error:")], "error:") {
			continue
		}
		rest := strings.TrimSpace(line[len("error:"):])
		if i+1 < len(lines) {
			if next := strings.TrimSpace(lines[i+1]); strings.HasPrefix(next, "on ") && strings.HasSuffix(next, ":") {
				rest += " (" + strings.TrimSuffix(next, ":") + ")"
			}
		}
		rest += lockList(lines[i+1:])
		if strings.HasSuffix(rest, escTooManyErrors) {
			if d := escDiagnostics(lines[:i]); d != "" {
				rest += ": " + d
			}
		}
		if rest == "" || seen[rest] {
			continue
		}
		seen[rest] = true
		if genericErrors[rest] {
			generic = append(generic, rest)
			continue
		}
		out = append(out, rest)
	}
	if len(out) == 0 {
		out = generic
	}
	return strings.Join(out, "; ")
}

// outputLine trims a line of CLI output, and the stream prefix a CLI error gives it.
func outputLine(line string) string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "stderr:")
	line = strings.TrimPrefix(line, "stdout:")
	return strings.TrimSpace(line)
}

// lockList returns the locks a self-managed backend lists under its "currently locked"
// error ("<lock URL>: created by user@host (pid N) at <time>", one per line), as " Locks: "
// and the lines joined with "; ", or "" when lines does not start with them: who holds a
// stack is what a person reading why it waits needs.
func lockList(lines []string) string {
	var locks []string
	for _, l := range lines {
		l = outputLine(l)
		if !lockHolder.MatchString(l) {
			break
		}
		locks = append(locks, l)
	}
	if len(locks) == 0 {
		return ""
	}
	return " Locks: " + strings.Join(locks, "; ")
}

// escTooManyErrors ends the CLI's error for an environment ESC refused to open (an
// unknown import, a bad definition); ESC's diagnostics, which say why, are the lines the
// CLI wrote just before it, without "error:" (pkg/cmd/pulumi/config's printESCDiagnostics).
const escTooManyErrors = "opening environment: too many errors"

// maxESCDiagnostics bounds the diagnostics escDiagnostics keeps.
const maxESCDiagnostics = 5

// escDiagnostics returns ESC's diagnostics among the lines before the CLI's
// escTooManyErrors error, joined with "; ": the non-empty lines right before it.
func escDiagnostics(before []string) string {
	var diags []string
	for i := len(before) - 1; i >= 0 && len(diags) < maxESCDiagnostics; i-- {
		l := outputLine(before[i])
		if l == "" || strings.HasPrefix(strings.ToLower(l), "error:") || strings.HasPrefix(l, "code:") {
			break
		}
		diags = append([]string{l}, diags...)
	}
	return strings.Join(diags, "; ")
}

func firstLine(text string) string {
	line, _, _ := strings.Cut(ansiEscape.ReplaceAllString(text, ""), "\n")
	return strings.TrimSpace(line)
}
