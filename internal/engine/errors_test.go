package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// cli builds a failed CLI invocation's error: stdout and stderr embedded.
func cli(stdout, stderr string) error {
	return &cliError{err: errors.New("failed to run update: exit status 1"), stdout: stdout, stderr: stderr, code: 1}
}

func TestClassify_SyntheticErrors_Class(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, ""},
		{"context canceled", fmt.Errorf("failed to update stack dev: %w", context.Canceled), ClassCancelled},
		{"deadline", context.DeadlineExceeded, ClassCancelled},
		{"run error keeps its class", &runError{action: "failed to select stack dev", class: ClassPermanent,
			cause: cli("", "error: dial tcp: i/o timeout")}, ClassPermanent},
		{"run error cancelled", &runError{action: "failed to update stack dev", class: ClassCancelled,
			cause: cli("", "error: update failed")}, ClassCancelled},
		{"diy lock", cli("", "error: the stack is currently locked by 1 lock(s). Either wait for the other "+
			"process(es) to end or delete the lock file with `pulumi cancel`."), ClassConflict},
		{"service 409", cli("", "error: [409] Conflict: Another update is currently in progress."), ClassConflict},
		{"update in progress", errors.New("stack dev already has an update in progress"), ClassConflict},
		{"wrapped conflict", fmt.Errorf("runner: %w", &runError{action: "failed to update stack dev",
			cause: cli("", "error: the stack is currently locked by 1 lock(s).")}), ClassConflict},
		{"connection refused", cli("    error: Get \"https://api.example.com\": dial tcp 10.0.0.1:443: connect: connection refused", ""),
			ClassTransient},
		{"timeout", errors.New("read tcp 10.0.0.2:5000->10.0.0.1:443: i/o timeout"), ClassTransient},
		{"service 503", cli("", "error: [503] Service Unavailable"), ClassTransient},
		{"too many requests", cli("", "error: [429] Too Many Requests"), ClassTransient},
		{"s3 backend down", errors.New("blob (key \".pulumi/stacks/dev.json\") (code=Unknown): RequestError: " +
			"send request failed\ncaused by: Get \"https://s3.amazonaws.com\": dial tcp: lookup s3.amazonaws.com: no such host"),
			ClassTransient},
		{"expect no changes", cli("", "error: no changes were expected for update but changes were proposed"), ClassPermanent},
		{"missing stack", cli("", "error: no stack named 'dev' found"), ClassPermanent},
		{"config error mentioning a timeout", cli("", "error: validating stack config: timeout must be a number; "+
			"connection refused"), ClassPermanent},
		{"runtime error mentioning the network", cli("    error: an unhandled error occurred: dial tcp: connection refused", ""),
			ClassPermanent},
		{"go build failure", cli("# main\n./main.go:3:2: undefined: foo\nerror: ./main.go:3:2: undefined: foo", ""), ClassPermanent},
		{"program error", cli("    Error: resource, variable, or config value \"x\" not found", ""), ClassPermanent},
		{"unknown", errors.New("something nobody has seen before"), ClassPermanent},
		{"missing provider", cli("    Error: error resolving type of resource cm: internal error loading package \"kubernetes\": rpc error: "+
			"code = Unknown desc = no resource plugin 'pulumi-resource-kubernetes' found in the workspace or on your $PATH", ""), ClassMissingPlugin},
		{"missing provider version, in colour", cli("    \x1b[31mError\x1b[0m: no resource plugin 'pulumi-resource-aws' found in the workspace "+
			"at version v6.1.0 or on your $PATH, install the plugin using `pulumi plugin install resource aws v6.1.0`", ""), ClassMissingPlugin},
		{"plugin source down", cli("    error: error resolving type of resource cm: internal error loading package \"kubernetes\": rpc error: code = Unknown desc = "+
			"Could not automatically download and install resource plugin 'pulumi-resource-kubernetes' at version v4.24.0, install the plugin using "+
			"`pulumi plugin install resource kubernetes v4.24.0`: failed to download plugin: kubernetes-4.24.0: 502 HTTP error fetching plugin from http://127.0.0.1:1/plugins/x", ""),
			ClassTransient},
		{"plugin not at the source", cli("    error: Could not automatically download and install resource plugin 'pulumi-resource-kubernetes' at version v4.99.0, install the plugin using "+
			"`pulumi plugin install resource kubernetes v4.99.0`: failed to download plugin: kubernetes-4.99.0: 404 HTTP error fetching plugin from http://127.0.0.1:1/plugins/x", ""),
			ClassMissingPlugin},
		{"missing language host", cli("", "error: no language plugin 'pulumi-language-nodejs' found in the workspace or on your $PATH"), ClassMissingPlugin},
		{"missing plugin behind a run error", &runError{action: "failed to update stack dev",
			cause: cli("", "error: no resource plugin 'pulumi-resource-random' found in the workspace or on your $PATH")}, ClassMissingPlugin},
		{"environments on a self-managed backend", &runError{action: "failed to preview stack dev",
			cause: cli("", "error: getting stack configuration: opening environment: backend runner-1 does not support environments; "+
				"Pulumi ESC environments require the Pulumi Cloud backend, use `pulumi login` without arguments to log into the Pulumi Cloud backend")},
			ClassBackendUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %q; want %q", tt.err, got, tt.want)
			}
		})
	}
}

const flakyStdout = `Updating (dev):
 +  pulumi:pulumi:Stack p-dev creating (0s)
 +  stackwright-testing:index:Flaky f creating (0s) error: flaky: attempt 1 of 2 fails
 +  stackwright-testing:index:Flaky f **creating failed** error: flaky: attempt 1 of 2 fails
Diagnostics:
  stackwright-testing:index:Flaky (f):
    error: flaky: attempt 1 of 2 fails

  pulumi:pulumi:Stack (p-dev):
    error: update failed

Resources:
    + 1 created
`

func TestMessage_Errors_SummarisesMeaningfulLines(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"diagnostics beat the generic update failed",
			&runError{action: "failed to update stack dev", cause: cli(flakyStdout, "error: update failed\n")},
			"failed to update stack dev: flaky: attempt 1 of 2 fails"},
		{"only the generic line",
			&runError{action: "failed to update stack dev", cause: cli("Updating (dev):\n", "error: update failed\n")},
			"failed to update stack dev: update failed"},
		{"hint between action and cause",
			&runError{action: "failed to select stack dev", hint: "stack dev does not exist and useLocalStackOnly forbids creating it",
				cause: cli("", "error: no stack named 'dev' found\n")},
			"failed to select stack dev: stack dev does not exist and useLocalStackOnly forbids creating it: no stack named 'dev' found"},
		{"language host error with colour and location",
			&runError{action: "failed to update stack dev", cause: cli("Diagnostics:\n    \x1b[31mError\x1b[0m: variable \"x\" not found\n"+
				"      on Pulumi.yaml line 8:\n       8:   content: ${x}\n", "")},
			`failed to update stack dev: variable "x" not found (on Pulumi.yaml line 8)`},
		{"no error lines: first line of the cause",
			&runError{action: "failed to read project in /w", cause: errors.New("unable to find project\nmore detail")},
			"failed to read project in /w: unable to find project"},
		{"secrets scrubbed",
			&runError{action: "failed to update stack dev", cause: cli("    error: bad token hunter2-secret\n", ""),
				scrub: newScrubber("hunter2-secret")},
			"failed to update stack dev: bad token [secret]"},
		{"lock conflict names the locks",
			&runError{action: "failed to update stack dev", cause: cli("", "error: the stack is currently locked by 2 lock(s). Either wait for the other process(es) to end or delete the lock file with `pulumi cancel`.\n"+
				"  file:///b/.pulumi/locks/organization/p/dev/a.json: created by ann@laptop (pid 12) at 2026-11-26T09:00:00Z\n"+
				"  s3://b/.pulumi/locks/organization/p/dev/b.json: created by root@runner-x (pid 7) at 2026-11-26T09:01:00Z\n"+
				"\nerror: update failed\n")},
			"failed to update stack dev: the stack is currently locked by 2 lock(s). Either wait for the other process(es) to end or delete the lock file with `pulumi cancel`. Locks: " +
				"file:///b/.pulumi/locks/organization/p/dev/a.json: created by ann@laptop (pid 12) at 2026-11-26T09:00:00Z; " +
				"s3://b/.pulumi/locks/organization/p/dev/b.json: created by root@runner-x (pid 7) at 2026-11-26T09:01:00Z"},
		{"foreign error", fmt.Errorf("outer: %w", errors.New("plain failure")), "outer: plain failure"},
		{"environment ESC refused to open says why",
			&runError{action: "failed to update stack acme/p/dev", cause: cli("", "unknown environment \"platform/missing\"\n"+
				"unknown environment \"defaults\"\nerror: getting stack configuration: opening environment: too many errors\n")},
			`failed to update stack acme/p/dev: getting stack configuration: opening environment: too many errors: ` +
				`unknown environment "platform/missing"; unknown environment "defaults"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Message(tt.err)); diff != "" {
				t.Errorf("Message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMessage_HugeError_BoundedValidUTF8(t *testing.T) {
	stdout := strings.Repeat("    error: ünïcödé failure number 12345678901234567890\n", 100)
	for i := range 100 {
		stdout += fmt.Sprintf("    error: distinct failure %d ünïcödé\n", i)
	}
	msg := Message(&runError{action: "failed to update stack dev", cause: cli(stdout, "")})
	if len(msg) > maxMessage {
		t.Errorf("len(Message) = %d; want at most %d", len(msg), maxMessage)
	}
	if !utf8.ValidString(msg) || !strings.HasSuffix(msg, "…") || strings.Contains(msg, "\n") {
		t.Errorf("Message = %q; want one valid UTF-8 paragraph ending in …", msg)
	}
}

func TestRunError_Error_ScrubsAndUnwraps(t *testing.T) {
	cause := cli("    error: token hunter2-secret rejected\n", "")
	err := &runError{action: "failed to update stack dev", cause: cause, ctx: context.Canceled, scrub: newScrubber("hunter2-secret")}
	if strings.Contains(err.Error(), "hunter2-secret") || !strings.HasPrefix(err.Error(), "failed to update stack dev: ") {
		t.Errorf("Error() = %q; want the action first and the secret masked", err.Error())
	}
	if !errors.Is(err, context.Canceled) {
		t.Error("errors.Is(err, context.Canceled) = false; want true")
	}
	var ce *cliError
	if !errors.As(err, &ce) {
		t.Error("errors.As(err, *cliError) = false; want the cause reachable")
	}
}

func TestFindMissingPlugin_Errors_NameAndVersion(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		want   MissingPlugin
		wantOK bool
	}{
		{"nil", nil, MissingPlugin{}, false},
		{"other error", cli("", "error: update failed"), MissingPlugin{}, false},
		{"any version", cli("error: no resource plugin 'pulumi-resource-kubernetes' found in the workspace or on your $PATH", ""),
			MissingPlugin{Kind: "resource", Binary: "pulumi-resource-kubernetes"}, true},
		{"a version", cli("error: no resource plugin 'pulumi-resource-kubernetes' found in the workspace at version v4.18.0 or on your $PATH", ""),
			MissingPlugin{Kind: "resource", Binary: "pulumi-resource-kubernetes", Version: "v4.18.0"}, true},
		{"a prerelease, then a comma", cli("", "error: no analyzer plugin 'pulumi-analyzer-policy' found in the workspace at version v1.2.3-alpha.1+abc, install it"),
			MissingPlugin{Kind: "analyzer", Binary: "pulumi-analyzer-policy", Version: "v1.2.3-alpha.1+abc"}, true},
		{"not at the plugin source", cli("    error: error resolving type of resource cm: internal error loading package \"kubernetes\": rpc error: code = Unknown desc = "+
			"Could not automatically download and install resource plugin 'pulumi-resource-kubernetes' at version v4.99.0, install the plugin using "+
			"`pulumi plugin install resource kubernetes v4.99.0`: error downloading provider kubernetes to file: failed to download plugin: kubernetes-4.99.0: "+
			"404 HTTP error fetching plugin from http://127.0.0.1:18765/plugins/pulumi-resource-kubernetes-v4.99.0-linux-amd64.tar.gz", ""),
			MissingPlugin{Kind: "resource", Binary: "pulumi-resource-kubernetes", Version: "v4.99.0", Why: MissingAtSource}, true},
		{"the plugin source failing is not a missing plugin", cli("    error: Could not automatically download and install resource plugin 'pulumi-resource-kubernetes' at version v4.99.0, "+
			"install the plugin using `pulumi plugin install resource kubernetes v4.99.0`: failed to download plugin: kubernetes-4.99.0: 502 HTTP error fetching plugin from http://127.0.0.1:1/plugins/x", ""),
			MissingPlugin{}, false},
		{"no version to download", cli("    error: error resolving type of resource pet: internal error loading package \"random\": rpc error: code = Unknown desc = "+
			"could not find latest version for provider random: GetLatestVersion is not supported for plugins from http sources", ""),
			MissingPlugin{Kind: "resource", Binary: "pulumi-resource-random", Why: MissingVersion}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := FindMissingPlugin(tt.err)
			if ok != tt.wantOK {
				t.Fatalf("FindMissingPlugin ok = %v; want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FindMissingPlugin (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMessage_MissingPlugin_SaysWhatAndHow(t *testing.T) {
	err := &runError{action: "failed to update stack dev", cause: cli("    error: error resolving type of resource cm: "+
		"no resource plugin 'pulumi-resource-kubernetes' found in the workspace at version v4.18.0 or on your $PATH", "")}
	msg := Message(err)
	for _, want := range []string{
		"failed to update stack dev",
		"the engine has no plugin pulumi-resource-kubernetes v4.18.0 and never downloads one",
		"spec.stackwright.plugins", "--plugin-bundle", "pulumi.com/reconciliation-request",
		"no resource plugin 'pulumi-resource-kubernetes' found",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Message = %q; want it to contain %q", msg, want)
		}
	}
}
