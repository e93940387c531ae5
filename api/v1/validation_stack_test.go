package v1_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// Manifests at the edges of the rules are accepted: PKO clients that send empty strings for
// unused sources, deprecated PKO fields, every reference type, every git auth mode.
func TestStack_Create_AcceptsValid(t *testing.T) {
	cases := []struct {
		name string
		spec string
	}{
		{"gitCommit", `
stack: org/project/dev
projectRepo: https://example.com/repo.git
commit: 2b0889718d3e63feeb6079ccd5e4488d8601e353`},
		{"gitBranchFullRef", `
stack: dev
projectRepo: https://example.com/repo.git
branch: refs/heads/main
repoDir: infra
shallow: true`},
		{"emptyGitFieldsWithProgramRef", `
stack: dev
projectRepo: ""
commit: ""
branch: ""
repoDir: ""
gitAuthSecret: ""
shallow: false
programRef: {name: prog}`},
		{"nullSourcesWithProgramRef", `
stack: dev
fluxSource: null
gitAuth: null
programRef: {name: prog}`},
		{"pkoCustomSourceImageAndLocalDir", `
stack: dev
workspaceTemplate:
  spec:
    image: registry.example.com/infra-program:1.4.2
    local: {dir: /share/source}`},
		{"noSourceAdmittedAsPKODoes", `
stack: dev`},
		{"emptyProjectRepoIsNoSource", `
stack: dev
projectRepo: ""`},
		{"fluxSourceWithDir", `
stack: dev
fluxSource:
  sourceRef: {apiVersion: source.toolkit.fluxcd.io/v1beta2, kind: OCIRepository, name: app}
  dir: deploy/pulumi`},
		{"deprecatedFields", `
stack: dev
projectRepo: https://example.com/repo.git
branch: main
accessTokenSecret: pulumi-token
envs: [app-env]
envSecrets: [app-secret-env]
secrets: {app:password: hunter2}
gitAuthSecret: git-credentials`},
		{"everyReferenceType", `
stack: dev
programRef: {name: prog}
envRefs:
  FROM_ENV: {type: Env, env: {name: HOME}}
  FROM_FS: {type: FS, filesystem: {path: /var/run/token}}
  FROM_SECRET: {type: Secret, secret: {name: creds, key: token}}
  FROM_SECRET_NS: {type: Secret, secret: {namespace: other, name: creds, key: token}}
  FROM_LITERAL: {type: Literal, literal: {value: ""}}
secretsRef:
  app:password: {type: Secret, secret: {name: creds, key: password}}
configRef:
  app:replicas: {name: settings, key: replicas, json: true}`},
		{"everyGitAuthMode", `
stack: dev
projectRepo: git@example.com:org/repo.git
commit: abc123
gitAuth:
  accessToken: {type: Secret, secret: {name: git, key: token}}
  sshAuth:
    sshPrivateKey: {type: Secret, secret: {name: git, key: key}}
    password: {type: Secret, secret: {name: git, key: passphrase}}
  basicAuth:
    userName: {type: Literal, literal: {value: bot}}
    password: {type: Secret, secret: {name: git, key: password}}`},
		{"githubApp", `
stack: dev
projectRepo: https://github.com/org/repo.git
branch: main
gitAuth:
  githubApp:
    appID: {type: Literal, literal: {value: "12345"}}
    installationID: {type: Literal, literal: {value: "678"}}
    privateKey: {type: Secret, secret: {name: app, key: pem}}`},
		{"prerequisitesAndDurations", `
stack: dev
programRef: {name: prog}
prerequisites:
  - name: network
  - name: database
    requirement: {succeededWithinDuration: 1h30m}
  - name: dns
    requirement: {succeededWithinDuration: 90s}
  - name: cache
    requirement: {succeededWithinDuration: 0.5h}`},
		{"zeroesAndDefaults", `
stack: dev
programRef: {name: prog}
resyncFrequencySeconds: 0
retryMaxBackoffDurationSeconds: 0
workspaceReclaimPolicy: Delete`},
		{"everyLifecycleFlag", `
stack: dev
programRef: {name: prog}
targets: ["urn:pulumi:dev::p::random:index/randomString:RandomString::s"]
targetDependents: true
continueResyncOnCommitMatch: true
refresh: true
expectNoRefreshChanges: true
runProgram: true
destroyOnFinalize: true
retryOnUpdateConflict: true
useLocalStackOnly: true
resyncFrequencySeconds: 30
retryMaxBackoffDurationSeconds: 600
preview: true
serviceAccountName: stack-runner
backend: s3://state-bucket
secretsProvider: awskms://alias/pulumi
environment: [org/shared]
driftDetection:
  schedules:
    - cron: "*/15 * * * *"
      autoRemediate: true
stackwright: {suspend: true}`},
		{"identityTokensForEveryCloud", `
stack: dev
programRef: {name: prog}
stackwright:
  identityTokens:
    - {audience: sts.amazonaws.com, announce: AWS, expirationSeconds: 600}
    - {audience: api://AzureADTokenExchange, announce: Azure, expirationSeconds: 86400}
    - {audience: //iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/pool/providers/k8s, announce: Google, env: GOOGLE_TOKEN_FILE}
    - {audience: vault, env: VAULT_JWT_FILE}
    - {audience: other, announce: None}`},
	}
	ctx := testContext(t)
	ns := env.Namespace(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var spec map[string]any
			if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatal(err)
			}
			obj := newObject("pulumi.com/v1", "Stack", ns, strings.ToLower(tc.name))
			obj.Object["spec"] = spec
			if err := env.Client.Create(ctx, obj, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
}

// An identity token that gives only its audience is stored with the documented defaults:
// an hour's lifetime, announced to no cloud.
func TestStack_Create_DefaultsIdentityTokens(t *testing.T) {
	ctx := testContext(t)
	st := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "tokens", Namespace: env.Namespace(t)},
		Spec: pulumiv1.StackSpec{
			Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "prog"},
			Stackwright: &pulumiv1.StackwrightSpec{IdentityTokens: []pulumiv1.IdentityToken{
				{Audience: "sts.amazonaws.com"},
				{Audience: "vault", ExpirationSeconds: ptr(int64(7200)), Announce: pulumiv1.AnnounceAWS, Env: "VAULT_JWT_FILE"},
			}},
		},
	}
	if err := env.Client.Create(ctx, st); err != nil {
		t.Fatal(err)
	}
	got := &pulumiv1.Stack{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(st), got); err != nil {
		t.Fatal(err)
	}
	want := []pulumiv1.IdentityToken{
		{Audience: "sts.amazonaws.com", ExpirationSeconds: ptr(int64(3600)), Announce: pulumiv1.AnnounceNone},
		{Audience: "vault", ExpirationSeconds: ptr(int64(7200)), Announce: pulumiv1.AnnounceAWS, Env: "VAULT_JWT_FILE"},
	}
	if diff := cmp.Diff(want, got.Spec.IdentityTokens()); diff != "" {
		t.Errorf("stored identityTokens (-want +got):\n%s", diff)
	}
}

// Free-form JSON (config values) and PKO's templates survive storage exactly, through the
// typed API and through unstructured objects.
func TestStack_Create_RoundTripsFreeFormJSON(t *testing.T) {
	config := map[string]string{
		"app:replicas":   `3`,
		"app:negative":   `-7`,
		"app:bigInt":     `9007199254740993`,
		"app:ratio":      `0.25`,
		"app:pi":         `3.14159`,
		"app:enabled":    `true`,
		"app:disabled":   `false`,
		"app:name":       `"web"`,
		"app:emptyText":  `""`,
		"app:numberText": `"42"`,
		"app:tags":       `["a","b","c"]`,
		"app:mixedList":  `[1,2.5,"three",true,{"four":4},[5]]`,
		"app:emptyList":  `[]`,
		"app:emptyMap":   `{}`,
		"app:nested":     `{"db":{"host":"db.local","port":5432,"options":{"ssl":true,"timeouts":[1,2,3]}},"weights":{"a":0.5,"b":1}}`,
		"aws:region":     `"us-east-1"`,
	}
	workspaceTemplate := `{
		"metadata": {"labels": {"team": "infra"}, "annotations": {"example.com/x": "y"}},
		"spec": {
			"image": "pulumi/pulumi:3.200.0-nonroot",
			"resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
			"env": [{"name": "TF_LOG", "value": "debug"}],
			"podTemplate": {"spec": {
				"nodeSelector": {"kubernetes.io/arch": "amd64"},
				"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "pulumi", "effect": "NoSchedule"}],
				"containers": [{"name": "pulumi", "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]}],
				"volumes": [{"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}}]
			}}
		}
	}`
	updateTemplate := `{"metadata": {"labels": {"audit": "yes"}}, "spec": {"ttlAfterCompleted": "1h", "parallel": 8, "message": "from k8s"}}`

	t.Run("typed", func(t *testing.T) {
		ctx := testContext(t)
		ns := env.Namespace(t)
		in := &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Name: "typed", Namespace: ns},
			Spec: pulumiv1.StackSpec{
				Stack:             "dev",
				ProgramRef:        &pulumiv1.ProgramReference{Name: "prog"},
				Config:            map[string]apiextensionsv1.JSON{},
				WorkspaceTemplate: decodeInto[pulumiv1.WorkspaceTemplate](t, workspaceTemplate),
				UpdateTemplate:    decodeInto[pulumiv1.UpdateTemplate](t, updateTemplate),
				GitSource:         pulumiv1.GitSource{},
				Stackwright:       &pulumiv1.StackwrightSpec{Suspend: true},
			},
		}
		for k, v := range config {
			in.Spec.Config[k] = *rawJSON(t, v)
		}
		want := in.Spec.DeepCopy()
		if err := env.Client.Create(ctx, in); err != nil {
			t.Fatalf("failed to create Stack: %v", err)
		}
		got := &pulumiv1.Stack{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(in), got); err != nil {
			t.Fatalf("failed to get Stack: %v", err)
		}
		if diff := cmp.Diff(*want, got.Spec, jsonByValue); diff != "" {
			t.Errorf("spec changed in storage (-sent +stored):\n%s", diff)
		}
	})

	t.Run("unstructured", func(t *testing.T) {
		ctx := testContext(t)
		ns := env.Namespace(t)
		spec := map[string]any{
			"stack":             "dev",
			"programRef":        map[string]any{"name": "prog"},
			"config":            map[string]any{},
			"workspaceTemplate": decodeJSON(t, workspaceTemplate),
			"updateTemplate":    decodeJSON(t, updateTemplate),
		}
		for k, v := range config {
			spec["config"].(map[string]any)[k] = decodeJSON(t, v)
		}
		want := runtime.DeepCopyJSONValue(spec)
		obj := newObject("pulumi.com/v1", "Stack", ns, "unstructured")
		obj.Object["spec"] = spec
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("failed to create Stack: %v", err)
		}
		got := newObject("pulumi.com/v1", "Stack", ns, "unstructured")
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatalf("failed to get Stack: %v", err)
		}
		if diff := cmp.Diff(want, got.Object["spec"]); diff != "" {
			t.Errorf("spec changed in storage (-sent +stored):\n%s", diff)
		}
	})
}

// The API server stores JSON as the API machinery decodes it (integers as int64, other
// numbers as float64) and drops null values of schema-declared map entries. These are the
// only ways a free-form value comes back different from what was sent; docs/api.md
// documents them.
func TestStack_Create_NormalisesEdgeJSON(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		want string // "" means the key is gone
	}{
		{"zeroFractionBecomesInteger", `1.0`, `1`},
		{"exponentIsExpanded", `1e3`, `1000`},
		{"beyondInt64LosesPrecision", `12345678901234567890`, `12345678901234567000`},
		{"topLevelNullIsDropped", `null`, ``},
		{"nestedNullIsKept", `{"z":1,"a":null}`, `{"a":null,"z":1}`},
		{"objectKeysAreSorted", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
	}
	ctx := testContext(t)
	ns := env.Namespace(t)
	in := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "edges", Namespace: ns},
		Spec: pulumiv1.StackSpec{
			Stack:      "dev",
			ProgramRef: &pulumiv1.ProgramReference{Name: "prog"},
			Config:     map[string]apiextensionsv1.JSON{},
		},
	}
	for _, tc := range cases {
		in.Spec.Config[tc.name] = apiextensionsv1.JSON{Raw: []byte(tc.raw)}
	}
	if err := env.Client.Create(ctx, in); err != nil {
		t.Fatalf("failed to create Stack: %v", err)
	}
	got := &pulumiv1.Stack{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(in), got); err != nil {
		t.Fatalf("failed to get Stack: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := got.Spec.Config[tc.name]
			if tc.want == "" {
				if ok {
					t.Errorf("config value %s came back as %s; want it dropped", tc.raw, v.Raw)
				}
				return
			}
			if string(v.Raw) != tc.want {
				t.Errorf("config value %s came back as %s; want %s", tc.raw, v.Raw, tc.want)
			}
		})
	}
}
