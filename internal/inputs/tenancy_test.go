package inputs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

func literal(v string) pulumiv1.ResourceRef {
	return pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorLiteral, ResourceSelector: pulumiv1.ResourceSelector{Literal: &pulumiv1.LiteralRef{Value: v}}}
}

func TestResolve_InManager_RefusesWhatReachesPastTheNamespace(t *testing.T) {
	const state = "/data/state"
	bulk := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "bulk"}, Data: map[string][]byte{"LD_PRELOAD": []byte("/tmp/x.so")}}
	tests := []struct {
		name string
		spec pulumiv1.StackSpec
		// wantErr is a substring of the SpecInvalid fault; "" means the Stack resolves.
		wantErr string
	}{
		{name: "ownDefaultStateResolves"},
		{name: "ownNamespaceDirectoryResolves", spec: pulumiv1.StackSpec{Backend: "file:///data/state/a/sub"}},
		{name: "cloudBackendResolves", spec: pulumiv1.StackSpec{Backend: "https://api.pulumi.com"}},
		{name: "objectStoreResolves", spec: pulumiv1.StackSpec{Backend: "s3://bucket/a"}},
		{name: "ordinaryVariablesResolve", spec: pulumiv1.StackSpec{EnvRefs: map[string]pulumiv1.ResourceRef{"AWS_REGION": literal("eu-west-1"), "PULUMI_CONFIG_PASSPHRASE": literal("mine")}}},
		{name: "otherTenantsStateIsRefused", spec: pulumiv1.StackSpec{Backend: "file:///data/state/b"}, wantErr: "backend file:///data/state/b is outside this namespace's state directory /data/state/a"},
		{name: "dotDotOutOfOwnDirectoryIsRefused", spec: pulumiv1.StackSpec{Backend: "file:///data/state/a/../b"}, wantErr: "is outside this namespace's state directory"},
		{name: "escapedDotDotIsRefused", spec: pulumiv1.StackSpec{Backend: "file:///data/state/a/%2e%2e/b"}, wantErr: "is outside this namespace's state directory"},
		{name: "prefixSiblingIsRefused", spec: pulumiv1.StackSpec{Backend: "file:///data/state/ab"}, wantErr: "is outside this namespace's state directory"},
		{name: "stateRootItselfIsRefused", spec: pulumiv1.StackSpec{Backend: "file:///data/state"}, wantErr: "is outside this namespace's state directory"},
		{name: "upperCaseSchemeIsRefused", spec: pulumiv1.StackSpec{Backend: "FILE:///data/state/b"}, wantErr: "a file backend must be written file://<path>"},
		{name: "singleSlashSchemeIsRefused", spec: pulumiv1.StackSpec{Backend: "file:/data/state/b"}, wantErr: "a file backend must be written file://<path>"},
		{name: "homeDirectoryIsRefused", spec: pulumiv1.StackSpec{Backend: "file://~"}, wantErr: "backend file://~ is outside"},
		{name: "backendFromEnvironmentIsRefused", spec: pulumiv1.StackSpec{EnvRefs: map[string]pulumiv1.ResourceRef{EnvBackendURL: literal("file:///var/lib/stackwright")}}, wantErr: "backend file:///var/lib/stackwright is outside"},
		{name: "pathIsRefused", spec: pulumiv1.StackSpec{EnvRefs: map[string]pulumiv1.ResourceRef{"PATH": literal("/tmp/evil")}}, wantErr: "the environment sets PATH,"},
		{name: "pulumiHomeIsRefused", spec: pulumiv1.StackSpec{EnvRefs: map[string]pulumiv1.ResourceRef{"PULUMI_HOME": literal("/tmp/evil")}}, wantErr: "the environment sets PULUMI_HOME,"},
		{name: "passphraseFileIsRefused", spec: pulumiv1.StackSpec{EnvRefs: map[string]pulumiv1.ResourceRef{EnvPassphraseFile: literal("/data/passphrases/b")}}, wantErr: "sets PULUMI_CONFIG_PASSPHRASE_FILE,"},
		{name: "kubernetesServiceIsRefused", spec: pulumiv1.StackSpec{EnvRefs: map[string]pulumiv1.ResourceRef{"KUBERNETES_SERVICE_HOST": literal("10.0.0.1")}}, wantErr: "sets KUBERNETES_SERVICE_HOST,"},
		{name: "bulkSecretsAreCheckedToo", spec: pulumiv1.StackSpec{EnvSecrets: []string{"bulk"}}, wantErr: "sets LD_PRELOAD,"},
		{name: "everyReservedKeyIsNamed", spec: pulumiv1.StackSpec{EnvRefs: map[string]pulumiv1.ResourceRef{"PATH": literal("x"), "HOME": literal("y")}}, wantErr: "sets HOME, PATH,"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "a"}, Spec: tt.spec}
			opts := Options{DefaultBackend: "file://" + state, Passphrases: &Passphrases{Dir: t.TempDir()}, InManager: true, StateRoot: state}
			_, err := Resolve(context.Background(), newReader(t, bulk), st, opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				return
			}
			f, ok := fault.As(err)
			if !ok || !f.Stalled || f.Reason != pulumiv1.ReasonSpecInvalid || !strings.Contains(f.Error(), tt.wantErr) {
				t.Fatalf("Resolve = %v, want a stalled SpecInvalid fault containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestResolve_JobExecutor_LetsReservedVariablesThrough(t *testing.T) {
	// In a runner Pod these variables only steer the tenant's own Pod.
	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "a"}, Spec: pulumiv1.StackSpec{
		Backend: "file:///somewhere", EnvRefs: map[string]pulumiv1.ResourceRef{"PATH": literal("/opt/bin")},
	}}
	got, err := Resolve(context.Background(), newReader(t), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Env["PATH"] != "/opt/bin" {
		t.Errorf("PATH = %q, want /opt/bin", got.Env["PATH"])
	}
}

func TestReserved_Names(t *testing.T) {
	got := map[string]bool{}
	for _, k := range []string{"PATH", "PATHS", "LD_PRELOAD", "LD", "GIT_SSH_COMMAND", "KUBERNETES_PORT_443_TCP_ADDR", "KUBECONFIG", "PULUMI_ACCESS_TOKEN", "PULUMI_BACKEND_URL", "AWS_REGION", "NODE_OPTIONS"} {
		got[k] = Reserved(k)
	}
	want := map[string]bool{
		"PATH": true, "PATHS": false, "LD_PRELOAD": true, "LD": false, "GIT_SSH_COMMAND": true,
		"KUBERNETES_PORT_443_TCP_ADDR": true, "KUBECONFIG": true, "PULUMI_ACCESS_TOKEN": false,
		"PULUMI_BACKEND_URL": false, "AWS_REGION": false, "NODE_OPTIONS": true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Reserved (-want +got):\n%s", diff)
	}
}

// readPassphrase returns the content of namespace's passphrase file, checking where it is.
func readPassphrase(t *testing.T, p *Passphrases, namespace string) string {
	t.Helper()
	path, err := p.File(namespace)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(p.Dir, namespace) {
		t.Errorf("File(%s) = %s, want it in %s", namespace, path, p.Dir)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPassphrases_File_OnePerNamespace(t *testing.T) {
	p := &Passphrases{Dir: filepath.Join(t.TempDir(), "passphrases")}
	a, b := readPassphrase(t, p, "a"), readPassphrase(t, p, "b")
	if a == b || len(a) < 40 {
		t.Errorf("namespaces share a passphrase, or it is short: a=%q b=%q", a, b)
	}
	if again := readPassphrase(t, p, "a"); again != a {
		t.Errorf("passphrase of a changed: %q, then %q", a, again)
	}
	if left, _ := filepath.Glob(filepath.Join(p.Dir, ".new-*")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
	for _, bad := range []string{"", "..", "a/b"} {
		if _, err := p.File(bad); err == nil {
			t.Errorf("File(%q) succeeded, want an error", bad)
		}
	}
}

// An installation from before passphrases were per namespace may have encrypted any
// namespace's stacks (on any self-managed backend) with its one passphrase: every
// namespace keeps it.
func TestPassphrases_File_UpgradedInstallKeepsTheSharedOne(t *testing.T) {
	root := t.TempDir()
	shared := filepath.Join(root, "passphrase")
	if err := os.WriteFile(shared, []byte("shared-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Passphrases{Dir: filepath.Join(root, "passphrases"), Shared: shared}
	for _, ns := range []string{"a", "b"} {
		if got := readPassphrase(t, p, ns); got != "shared-secret" {
			t.Errorf("namespace %s got %q, want the shared passphrase", ns, got)
		}
	}
}

// The guidance admission policy warns about the same variables the local executor refuses.
func TestReservedEnv_GuidancePolicy_NamesTheSameVariables(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "config", "admission", "stack_guidance_policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var expr, msg string
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.Contains(l, "steers the engine itself") {
			expr, msg = lines[i-1], l
		}
	}
	if expr == "" {
		t.Fatal("the guidance policy has no rule about variables that steer the engine")
	}
	if want := "(one of " + strings.Join(ReservedEnv, ", ") + ")"; !strings.Contains(msg, want) {
		t.Errorf("the policy's message does not list %s:\n%s", want, msg)
	}
	for _, r := range ReservedEnv {
		check := "'" + r + "'"
		if p, ok := strings.CutSuffix(r, "*"); ok {
			check = "k.startsWith('" + p + "')"
		}
		if !strings.Contains(expr, check) {
			t.Errorf("the policy's expression lacks %s", check)
		}
	}
	if n := strings.Count(expr, "'"); n != 2*len(ReservedEnv) {
		t.Errorf("the policy's expression quotes %d names, want the %d of ReservedEnv", n/2, len(ReservedEnv))
	}
}
