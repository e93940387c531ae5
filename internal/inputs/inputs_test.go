package inputs

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
)

func secretRef(name, key string) pulumiv1.ResourceRef {
	return pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorSecret, ResourceSelector: pulumiv1.ResourceSelector{Secret: &pulumiv1.SecretSelector{Name: name, Key: key}}}
}

func newReader(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func TestResolve_Spec_ResolvesConfigAndEnvironment(t *testing.T) {
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{
			"token": []byte("tok"), "pw": []byte("pw"), "accessToken": []byte("old-token"),
		}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bulk"}, Data: map[string][]byte{"FROM_BULK": []byte("b")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "settings"}, Data: map[string]string{
			"replicas": "3", "tags": `["a","b"]`, "FROM_ENVS": "e",
		}},
	}
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Spec: pulumiv1.StackSpec{
		Stack:  "dev",
		Config: map[string]apiextensionsv1.JSON{"app:inline": {Raw: []byte(`{"a":1}`)}},
		ConfigRef: map[string]pulumiv1.ConfigMapRef{
			"app:replicas": {Name: "settings", Key: "replicas"},
			"app:tags":     {Name: "settings", Key: "tags", JSON: true},
		},
		Secrets:           map[string]string{"app:legacy": "inline-secret"},
		SecretsRef:        map[string]pulumiv1.ResourceRef{"app:pw": secretRef("creds", "pw")},
		Envs:              []string{"settings"},
		EnvSecrets:        []string{"bulk"},
		AccessTokenSecret: "creds",
		EnvRefs: map[string]pulumiv1.ResourceRef{
			// An explicit envRef wins over the deprecated accessTokenSecret.
			EnvAccessToken: secretRef("creds", "token"),
			"LITERAL":      {Type: pulumiv1.ResourceSelectorLiteral, ResourceSelector: pulumiv1.ResourceSelector{Literal: &pulumiv1.LiteralRef{Value: "lit"}}},
		},
	}}
	got, err := Resolve(context.Background(), newReader(t, objs...), stack, Options{DefaultBackend: "file:///data/state", Passphrases: &Passphrases{Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	wantConfig := map[string]ConfigValue{
		"app:inline":   {Value: []byte(`{"a":1}`)},
		"app:replicas": {Value: []byte(`"3"`)},
		"app:tags":     {Value: []byte(`["a","b"]`)},
		"app:legacy":   {Value: []byte(`"inline-secret"`), Secret: true},
		"app:pw":       {Value: []byte(`"pw"`), Secret: true},
	}
	if diff := cmp.Diff(wantConfig, got.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	// With an access token, no backend means Pulumi Cloud, as in PKO: no default backend
	// and so no default passphrase.
	wantEnv := map[string]string{"FROM_ENVS": "e", "replicas": "3", "tags": `["a","b"]`, "FROM_BULK": "b", EnvAccessToken: "tok", "LITERAL": "lit"}
	if diff := cmp.Diff(wantEnv, got.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}

func TestResolve_Backend_DefaultsLikePKO(t *testing.T) {
	dir := t.TempDir()
	opts := Options{DefaultBackend: "file:///data/state", Passphrases: &Passphrases{Dir: dir}}
	pass := filepath.Join(dir, "ns")
	tests := []struct {
		name string
		spec pulumiv1.StackSpec
		want map[string]string
	}{
		{name: "nothingGivenUsesNamespacesDirInManagersBackend", want: map[string]string{EnvBackendURL: "file:///data/state/ns", EnvPassphraseFile: pass}},
		{name: "specBackendWins", spec: pulumiv1.StackSpec{Backend: "s3://bucket"}, want: map[string]string{EnvBackendURL: "s3://bucket", EnvPassphraseFile: pass}},
		{name: "cloudBackendNeedsNoPassphrase", spec: pulumiv1.StackSpec{Backend: "https://api.pulumi.com"}, want: map[string]string{EnvBackendURL: "https://api.pulumi.com"}},
		{name: "kmsProviderNeedsNoPassphrase", spec: pulumiv1.StackSpec{SecretsProvider: "awskms://alias/x"}, want: map[string]string{EnvBackendURL: "file:///data/state/ns"}},
		{
			name: "stackPassphraseKept",
			spec: pulumiv1.StackSpec{EnvRefs: map[string]pulumiv1.ResourceRef{EnvPassphrase: {Type: pulumiv1.ResourceSelectorLiteral, ResourceSelector: pulumiv1.ResourceSelector{Literal: &pulumiv1.LiteralRef{Value: "mine"}}}}},
			want: map[string]string{EnvBackendURL: "file:///data/state/ns", EnvPassphrase: "mine"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: tt.spec}
			got, err := Resolve(context.Background(), newReader(t), st, opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolve_DefaultBackend_NamespaceGoesBeforeQuery(t *testing.T) {
	for _, tt := range []struct{ name, base, want string }{
		{name: "plain", base: "s3://bucket", want: "s3://bucket/ns"},
		{name: "trailingSlash", base: "s3://bucket/prefix/", want: "s3://bucket/prefix/ns"},
		{name: "query", base: "s3://bucket?region=eu-west-1&endpoint=http://10.0.0.1:9000", want: "s3://bucket/ns?region=eu-west-1&endpoint=http://10.0.0.1:9000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: pulumiv1.StackSpec{SecretsProvider: "awskms://alias/x"}}
			got, err := Resolve(context.Background(), newReader(t), st, Options{DefaultBackend: tt.base})
			if err != nil {
				t.Fatal(err)
			}
			if got.Env[EnvBackendURL] != tt.want {
				t.Errorf("backend = %q, want %q", got.Env[EnvBackendURL], tt.want)
			}
		})
	}
}

func TestResolve_References_FailWithPreciseFaults(t *testing.T) {
	fsRoot := t.TempDir()
	if err := os.WriteFile(filepath.Join(fsRoot, "ok"), []byte("file-value"), 0o600); err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{"k": []byte("v")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"bad": "{not json"}},
	}
	env := func(r pulumiv1.ResourceRef) pulumiv1.StackSpec {
		return pulumiv1.StackSpec{EnvRefs: map[string]pulumiv1.ResourceRef{"X": r}}
	}
	tests := []struct {
		name        string
		spec        pulumiv1.StackSpec
		opts        Options
		wantReason  string
		wantStalled bool
		wantEnv     string
	}{
		{name: "missingSecret", spec: env(secretRef("nope", "k")), wantReason: pulumiv1.ReasonConfigUnavailable},
		{name: "missingKey", spec: env(secretRef("creds", "nope")), wantReason: pulumiv1.ReasonConfigUnavailable},
		{name: "missingConfigMap", spec: pulumiv1.StackSpec{ConfigRef: map[string]pulumiv1.ConfigMapRef{"a": {Name: "nope", Key: "k"}}}, wantReason: pulumiv1.ReasonConfigUnavailable},
		{name: "invalidJSON", spec: pulumiv1.StackSpec{ConfigRef: map[string]pulumiv1.ConfigMapRef{"a": {Name: "cm", Key: "bad", JSON: true}}}, wantReason: pulumiv1.ReasonSpecInvalid, wantStalled: true},
		{
			name:        "crossNamespaceSecret",
			spec:        env(pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorSecret, ResourceSelector: pulumiv1.ResourceSelector{Secret: &pulumiv1.SecretSelector{Namespace: "other", Name: "creds", Key: "k"}}}),
			wantReason:  pulumiv1.ReasonCrossNamespaceReference,
			wantStalled: true,
		},
		{
			name:        "envRefDisabled",
			spec:        env(pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorEnv, ResourceSelector: pulumiv1.ResourceSelector{Env: &pulumiv1.EnvSelector{Name: "HOME"}}}),
			wantReason:  pulumiv1.ReasonSpecInvalid,
			wantStalled: true,
		},
		{
			name:        "fsRefDisabled",
			spec:        env(pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorFS, ResourceSelector: pulumiv1.ResourceSelector{FileSystem: &pulumiv1.FSSelector{Path: "ok"}}}),
			wantReason:  pulumiv1.ReasonSpecInvalid,
			wantStalled: true,
		},
		{
			name:        "fsRefEscapingRoot",
			spec:        env(pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorFS, ResourceSelector: pulumiv1.ResourceSelector{FileSystem: &pulumiv1.FSSelector{Path: "../etc/passwd"}}}),
			opts:        Options{FSRoot: fsRoot},
			wantReason:  pulumiv1.ReasonSpecInvalid,
			wantStalled: true,
		},
		{
			name:    "fsRefInsideRoot",
			spec:    env(pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorFS, ResourceSelector: pulumiv1.ResourceSelector{FileSystem: &pulumiv1.FSSelector{Path: "ok"}}}),
			opts:    Options{FSRoot: fsRoot},
			wantEnv: "file-value",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: tt.spec}
			got, err := Resolve(context.Background(), newReader(t, objs...), st, tt.opts)
			if tt.wantReason == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got.Env["X"] != tt.wantEnv {
					t.Errorf("X = %q; want %q", got.Env["X"], tt.wantEnv)
				}
				return
			}
			f, ok := fault.As(err)
			if !ok {
				t.Fatalf("Resolve() error = %v; want a fault with reason %s", err, tt.wantReason)
			}
			if f.Reason != tt.wantReason || f.Stalled != tt.wantStalled {
				t.Errorf("fault = {%s, stalled %v}: %v; want {%s, stalled %v}", f.Reason, f.Stalled, f, tt.wantReason, tt.wantStalled)
			}
		})
	}
}

func TestResolve_Fingerprint_ChangesWithReferencedObjectsOnly(t *testing.T) {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{"k": []byte("v1")}}
	c := newReader(t, sec).(client.Client)
	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: pulumiv1.StackSpec{SecretsRef: map[string]pulumiv1.ResourceRef{"a": secretRef("creds", "k")}}}
	first, err := Resolve(context.Background(), c, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Resolve(context.Background(), c, st, Options{})
	if first.Fingerprint != again.Fingerprint {
		t.Fatalf("fingerprint not stable: %s then %s", first.Fingerprint, again.Fingerprint)
	}
	sec.Data["k"] = []byte("v2")
	if err := c.Update(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	changed, _ := Resolve(context.Background(), c, st, Options{})
	if changed.Fingerprint == first.Fingerprint {
		t.Errorf("changing the referenced Secret did not change the fingerprint")
	}
	for _, fp := range []string{first.Fingerprint, changed.Fingerprint} {
		if fp == "" || len(fp) != 64 {
			t.Errorf("fingerprint %q is not a sha256", fp)
		}
	}
}

// Under a key, the fingerprint follows what the engine would see: the referenced objects'
// content and identity, not their metadata. A finalizer or label added to a Secret (input
// protection does) must not make every Stack reading it run again.
func TestResolve_KeyedFingerprint_ContentNotMetadata(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds", UID: "uid-1"}, Data: map[string][]byte{"k": []byte("v1")}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "env", UID: "uid-2"}, Data: map[string]string{"A": "1"}}
	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: pulumiv1.StackSpec{
		SecretsRef: map[string]pulumiv1.ResourceRef{"a": secretRef("creds", "k")}, Envs: []string{"env"},
	}}
	fingerprint := func(t *testing.T, key []byte, objs ...client.Object) string {
		t.Helper()
		in, err := Resolve(context.Background(), newReader(t, objs...), st, Options{FingerprintKey: key})
		if err != nil {
			t.Fatal(err)
		}
		return in.Fingerprint
	}
	base := fingerprint(t, key, sec, cm)
	for _, tc := range []struct {
		name    string
		key     []byte
		objs    []client.Object
		changed bool
	}{
		{name: "FinalizerAndLabelIgnored", key: key, objs: []client.Object{
			func() client.Object {
				s := sec.DeepCopy()
				s.Finalizers, s.Labels, s.ResourceVersion = []string{"stackwright.dev/stack-inputs"}, map[string]string{"a": "b"}, "999"
				return s
			}(), cm,
		}},
		{name: "SecretValueCounts", key: key, changed: true, objs: []client.Object{
			func() client.Object { s := sec.DeepCopy(); s.Data = map[string][]byte{"k": []byte("v2")}; return s }(), cm,
		}},
		{name: "ConfigMapKeyCounts", key: key, changed: true, objs: []client.Object{
			sec, func() client.Object { c := cm.DeepCopy(); c.Data["B"] = "2"; return c }(),
		}},
		{name: "ReplacedObjectCounts", key: key, changed: true, objs: []client.Object{
			func() client.Object { s := sec.DeepCopy(); s.UID = "uid-3"; return s }(), cm,
		}},
		{name: "OtherKeyDiffers", key: []byte("fedcba9876543210fedcba9876543210"), changed: true, objs: []client.Object{sec, cm}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fingerprint(t, tc.key, tc.objs...); (got != base) != tc.changed {
				t.Errorf("fingerprint changed = %v; want %v", got != base, tc.changed)
			}
		})
	}
}
