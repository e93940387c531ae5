package v1_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

// Every sample and every PKO seed manifest is accepted by the real API server, passes
// strict field validation (so no field is silently dropped), and is stored unchanged.
func TestSamples_Create_Accepted(t *testing.T) {
	root := repoRoot(t)
	var files []string
	for _, pattern := range []string{
		filepath.Join(root, "config", "samples", "*.yaml"),
		filepath.Join(root, "api", "v1", "testdata", "seeds", "*.yaml"),
	} {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range matches {
			if filepath.Base(m) != "kustomization.yaml" {
				files = append(files, m)
			}
		}
	}
	if len(files) < 10 {
		t.Fatalf("found only %d sample and seed files: %v", len(files), files)
	}

	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			ns := env.Namespace(t)
			warnings, c := warningClient(t)
			docs := readDocs(t, file)
			if len(docs) == 0 {
				t.Fatalf("%s holds no manifest", file)
			}
			for _, doc := range docs {
				doc.SetNamespace(ns)
				key := name + ":" + doc.GetKind() + "/" + doc.GetName()
				sent := doc.DeepCopy()
				if err := c.Create(ctx, doc, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
					t.Fatalf("%s was refused: %v", key, err)
				}
				if w := warnings.get(); len(w) > 0 {
					t.Errorf("%s drew warnings from the API server: %v", key, w)
				}

				field, ok := userField(doc.GetKind())
				if !ok {
					continue // a Secret: stringData is folded into data, nothing to compare
				}
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(doc.GroupVersionKind())
				if err := c.Get(ctx, client.ObjectKeyFromObject(doc), got); err != nil {
					t.Fatalf("failed to get %s: %v", key, err)
				}
				if diff := cmp.Diff(sent.Object[field], got.Object[field]); diff != "" {
					t.Errorf("%s: %s changed in storage (-sent +stored):\n%s", key, field, diff)
				}
			}
		})
	}
}

// The samples cover every source kind, and each kind has a Stack that is fully described
// (no placeholder such as <YOUR_ORG>) where the source allows it.
func TestSamples_Stacks_CoverEverySourceKind(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "config", "samples", "pulumi_v1_stack_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[pulumiv1.SourceKind][]string{}
	for _, f := range files {
		for _, doc := range readDocs(t, f) {
			if doc.GetKind() != "Stack" {
				continue
			}
			var s pulumiv1.Stack
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(doc.Object, &s); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			got[s.Spec.SourceKind()] = append(got[s.Spec.SourceKind()], s.Name)
		}
	}
	for _, kind := range []pulumiv1.SourceKind{pulumiv1.SourceKindGit, pulumiv1.SourceKindFlux, pulumiv1.SourceKindProgram, pulumiv1.SourceKindImage} {
		if len(got[kind]) == 0 {
			t.Errorf("no sample Stack uses source kind %s; samples by kind: %v", kind, got)
		}
	}
	if names := got[""]; len(names) > 0 {
		t.Errorf("sample Stacks %v have no single source", names)
	}
}

// kustomization.yaml lists exactly the sample files, so `kubectl apply -k` applies them all.
func TestSamples_Kustomization_ListsEveryFile(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "config", "samples")
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" {
			want = append(want, base)
		}
	}
	got := slices.Clone(k.Resources)
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kustomization.yaml resources (-files +listed):\n%s", diff)
	}
}

// invalidCase is a manifest the API server must refuse, and a substring of the error that
// names the offending field.
type invalidCase struct {
	name string
	// body is the YAML of the object below metadata: "spec: ..." or "program: ...".
	body string
	want string
}

func TestStack_Create_RejectsInvalid(t *testing.T) {
	cases := []invalidCase{
		{
			name: "twoSources",
			body: `
spec:
  stack: dev
  projectRepo: https://example.com/repo.git
  commit: abc123
  programRef: {name: prog}`,
			want: "at most one of spec.projectRepo, spec.fluxSource or spec.programRef may be set",
		},
		{
			name: "threeSources",
			body: `
spec:
  stack: dev
  projectRepo: https://example.com/repo.git
  branch: main
  programRef: {name: prog}
  fluxSource: {sourceRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: repo}}`,
			want: "at most one of spec.projectRepo, spec.fluxSource or spec.programRef may be set",
		},
		{
			name: "commitAndBranch",
			body: `
spec:
  stack: dev
  projectRepo: https://example.com/repo.git
  commit: abc123
  branch: main`,
			want: "spec.commit and spec.branch are mutually exclusive",
		},
		{
			name: "projectRepoWithoutCommitOrBranch",
			body: `
spec:
  stack: dev
  projectRepo: https://example.com/repo.git`,
			want: "spec.projectRepo requires one of spec.commit or spec.branch",
		},
		{
			name: "commitWithoutRepo",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  commit: abc123`,
			want: "spec.commit and spec.branch are only valid with spec.projectRepo",
		},
		{
			name: "branchWithoutRepo",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  branch: main`,
			want: "spec.commit and spec.branch are only valid with spec.projectRepo",
		},
		{
			name: "repoDirWithFluxSource",
			body: `
spec:
  stack: dev
  fluxSource: {sourceRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: repo}}
  repoDir: stacks/dev`,
			want: "spec.repoDir is only valid with spec.projectRepo (use spec.fluxSource.dir with a Flux source)",
		},
		{
			name: "shallowWithoutRepo",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  shallow: true`,
			want: "spec.shallow is only valid with spec.projectRepo",
		},
		{
			name: "gitAuthWithoutRepo",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  gitAuth:
    accessToken: {type: Secret, secret: {name: git, key: token}}`,
			want: "spec.gitAuth and spec.gitAuthSecret are only valid with spec.projectRepo",
		},
		{
			name: "gitAuthSecretWithoutRepo",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  gitAuthSecret: git`,
			want: "spec.gitAuth and spec.gitAuthSecret are only valid with spec.projectRepo",
		},
		{
			name: "emptyStack",
			body: `
spec:
  stack: ""
  programRef: {name: prog}`,
			want: "spec.stack: Invalid value",
		},
		{
			name: "missingStack",
			body: `
spec:
  programRef: {name: prog}`,
			want: "spec.stack: Required value",
		},
		{
			name: "missingSpec",
			body: `
metadata: {}`,
			want: "spec: Required value",
		},
		{
			name: "wrongEnvRefType",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  envRefs:
    AWS_REGION: {type: ConfigMap, literal: {value: us-east-1}}`,
			want: `spec.envRefs.AWS_REGION.type: Unsupported value: "ConfigMap"`,
		},
		{
			name: "envRefWithoutType",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  envRefs:
    AWS_REGION: {literal: {value: us-east-1}}`,
			want: "spec.envRefs.AWS_REGION.type: Required value",
		},
		{
			name: "secretEnvRefWithoutSecret",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  envRefs:
    PULUMI_ACCESS_TOKEN: {type: Secret, literal: {value: oops}}`,
			want: "spec.envRefs[PULUMI_ACCESS_TOKEN]: Invalid value: a reference of type Secret must set secret.name and secret.key",
		},
		{
			name: "secretRefMissingKey",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  envRefs:
    PULUMI_ACCESS_TOKEN: {type: Secret, secret: {name: token}}`,
			want: "spec.envRefs.PULUMI_ACCESS_TOKEN.secret.key: Required value",
		},
		{
			name: "envEnvRefWithoutEnv",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  envRefs:
    HOME: {type: Env}`,
			want: "spec.envRefs[HOME]: Invalid value: a reference of type Env must set env.name",
		},
		{
			name: "fsSecretsRefWithoutFilesystem",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  secretsRef:
    dbPassword: {type: FS}`,
			want: "spec.secretsRef[dbPassword]: Invalid value: a reference of type FS must set filesystem.path",
		},
		{
			name: "literalSecretsRefWithoutLiteral",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  secretsRef:
    dbPassword: {type: Literal}`,
			want: "spec.secretsRef[dbPassword]: Invalid value: a reference of type Literal must set literal.value",
		},
		{
			name: "negativeResync",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  resyncFrequencySeconds: -1`,
			want: "spec.resyncFrequencySeconds: Invalid value: -1",
		},
		{
			name: "negativeRetryBackoff",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  retryMaxBackoffDurationSeconds: -30`,
			want: "spec.retryMaxBackoffDurationSeconds: Invalid value: -30",
		},
		{
			name: "resyncNotANumber",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  resyncFrequencySeconds: 60s`,
			want: "spec.resyncFrequencySeconds: Invalid value: \"string\"",
		},
		{
			name: "badReclaimPolicy",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  workspaceReclaimPolicy: Keep`,
			want: `spec.workspaceReclaimPolicy: Unsupported value: "Keep"`,
		},
		{
			name: "prerequisiteWithoutName",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  prerequisites:
    - requirement: {succeededWithinDuration: 1h}`,
			want: "spec.prerequisites[0].name: Required value",
		},
		{
			name: "prerequisiteEmptyName",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  prerequisites:
    - name: network
    - name: ""`,
			want: "spec.prerequisites[1].name: Invalid value",
		},
		{
			name: "badPrerequisiteDuration",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  prerequisites:
    - name: network
      requirement: {succeededWithinDuration: an hour}`,
			want: "spec.prerequisites[0].requirement.succeededWithinDuration: Invalid value: \"an hour\"",
		},
		{
			name: "negativePrerequisiteDuration",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  prerequisites:
    - name: network
      requirement: {succeededWithinDuration: -1h}`,
			want: "spec.prerequisites[0].requirement.succeededWithinDuration: Invalid value: \"-1h\"",
		},
		{
			name: "fluxSourceMissingKind",
			body: `
spec:
  stack: dev
  fluxSource: {sourceRef: {apiVersion: source.toolkit.fluxcd.io/v1, name: repo}}`,
			want: "spec.fluxSource.sourceRef.kind: Required value",
		},
		{
			name: "fluxSourceMissingSourceRef",
			body: `
spec:
  stack: dev
  fluxSource: {dir: stacks/dev}`,
			want: "spec.fluxSource.sourceRef: Required value",
		},
		{
			name: "programRefEmptyName",
			body: `
spec:
  stack: dev
  programRef: {name: ""}`,
			want: "spec.programRef.name: Invalid value",
		},
		{
			name: "gitAuthEmpty",
			body: `
spec:
  stack: dev
  projectRepo: https://example.com/repo.git
  branch: main
  gitAuth: {}`,
			want: "spec.gitAuth: Invalid value: spec.gitAuth must set one of accessToken, sshAuth, basicAuth or githubApp",
		},
		{
			name: "basicAuthWithoutPassword",
			body: `
spec:
  stack: dev
  projectRepo: https://example.com/repo.git
  branch: main
  gitAuth:
    basicAuth:
      userName: {type: Literal, literal: {value: bot}}`,
			want: "spec.gitAuth.basicAuth.password: Required value",
		},
		{
			name: "sshAuthWithoutKey",
			body: `
spec:
  stack: dev
  projectRepo: https://example.com/repo.git
  branch: main
  gitAuth:
    sshAuth:
      password: {type: Secret, secret: {name: ssh, key: passphrase}}`,
			want: "spec.gitAuth.sshAuth.sshPrivateKey: Required value",
		},
		{
			name: "configRefMissingKey",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  configRef:
    replicas: {name: settings}`,
			want: "spec.configRef.replicas.key: Required value",
		},
		{
			name: "configNotAnObject",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  config: "aws:region=us-east-1"`,
			want: "spec.config: Invalid value: \"string\"",
		},
		{
			name: "workspaceTemplateNotAnObject",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  workspaceTemplate: [image]`,
			want: "spec.workspaceTemplate: Invalid value: \"array\"",
		},
		{
			name: "driftScheduleWithoutCron",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  driftDetection:
    schedules:
      - autoRemediate: true`,
			want: "spec.driftDetection.schedules[0].cron: Required value",
		},
		{
			name: "suspendNotABoolean",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  stackwright: {suspend: "yes"}`,
			want: "spec.stackwright.suspend: Invalid value: \"string\"",
		},
		{
			name: "identityTokenWithoutAudience",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  stackwright:
    identityTokens: [{announce: AWS}]`,
			want: "spec.stackwright.identityTokens[0].audience: Required value",
		},
		{
			name: "identityTokenEmptyAudience",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  stackwright:
    identityTokens: [{audience: ""}]`,
			want: "spec.stackwright.identityTokens[0].audience: Invalid value",
		},
		{
			name: "identityTokenAudienceTooLong",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  stackwright:
    identityTokens: [{audience: ` + strings.Repeat("a", 257) + `}]`,
			want: "spec.stackwright.identityTokens[0].audience: Too long",
		},
		{
			name: "identityTokenRunnerAudience",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  stackwright:
    identityTokens: [{audience: stackwright.dev/runner}]`,
			want: "spec.stackwright.identityTokens[0]: Invalid value: audience stackwright.dev/runner is reserved for the runner's own token",
		},
		{
			name: "identityTokenGoogleAudienceNotAProvider",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  stackwright:
    identityTokens: [{audience: https://sts.googleapis.com, announce: Google}]`,
			want: "spec.stackwright.identityTokens[0]: Invalid value: announce: Google needs the workload identity provider's full resource name as audience (//iam.googleapis.com/...)",
		},
		{
			name: "identityTokenExpiresTooSoon",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  stackwright:
    identityTokens: [{audience: sts.amazonaws.com, expirationSeconds: 599}]`,
			want: "spec.stackwright.identityTokens[0].expirationSeconds: Invalid value: 599: spec.stackwright.identityTokens[0].expirationSeconds in body should be greater than or equal to 600",
		},
		{
			name: "identityTokenExpiresTooLate",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  stackwright:
    identityTokens: [{audience: sts.amazonaws.com, expirationSeconds: 86401}]`,
			want: "spec.stackwright.identityTokens[0].expirationSeconds: Invalid value: 86401: spec.stackwright.identityTokens[0].expirationSeconds in body should be less than or equal to 86400",
		},
		{
			name: "identityTokenUnknownCloud",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  stackwright:
    identityTokens: [{audience: x, announce: GCP}]`,
			want: `spec.stackwright.identityTokens[0].announce: Unsupported value: "GCP"`,
		},
		{
			name: "identityTokenBadEnvName",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  stackwright:
    identityTokens: [{audience: x, env: MY-TOKEN}]`,
			want: `spec.stackwright.identityTokens[0].env: Invalid value: "MY-TOKEN"`,
		},
		{
			name: "identityTokensSameAudience",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  stackwright:
    identityTokens: [{audience: sts.amazonaws.com}, {audience: sts.amazonaws.com, expirationSeconds: 7200}]`,
			want: "spec.stackwright.identityTokens: Invalid value: each audience may appear only once",
		},
		{
			name: "identityTokensAnnounceOneCloudTwice",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  stackwright:
    identityTokens: [{audience: a, announce: AWS}, {audience: b, announce: Azure}, {audience: c, announce: AWS}]`,
			want: "spec.stackwright.identityTokens: Invalid value: at most one token may announce each cloud (AWS, Azure, Google)",
		},
		{
			name: "identityTokensSameEnv",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  stackwright:
    identityTokens: [{audience: a, env: TOKEN}, {audience: b, env: TOKEN}]`,
			want: "spec.stackwright.identityTokens: Invalid value: each env name may appear only once",
		},
		{
			name: "identityTokensTooMany",
			body: `
spec:
  stack: dev
  programRef: {name: prog}
  stackwright:
    identityTokens: [{audience: a}, {audience: b}, {audience: c}, {audience: d}, {audience: e}, {audience: f}, {audience: g}, {audience: h}, {audience: i}]`,
			want: "spec.stackwright.identityTokens: Too many: 9: must have at most 8 items",
		},
	}
	runInvalid(t, "pulumi.com/v1", "Stack", cases)
}

func TestProgram_Create_RejectsInvalid(t *testing.T) {
	cases := []invalidCase{
		{
			name: "resourceWithoutType",
			body: `
program:
  resources:
    bucket:
      properties: {name: b}`,
			want: "program.resources.bucket.type: Required value",
		},
		{
			name: "resourceEmptyType",
			body: `
program:
  resources:
    bucket:
      type: ""`,
			want: "program.resources.bucket.type: Invalid value",
		},
		{
			name: "badConfigurationType",
			body: `
program:
  configuration:
    replicas: {type: Integer}`,
			want: `program.configuration.replicas.type: Unsupported value: "Integer"`,
		},
		{
			name: "getWithoutID",
			body: `
program:
  resources:
    vpc:
      type: aws:ec2:Vpc
      get: {state: {cidrBlock: 10.0.0.0/16}}`,
			want: "program.resources.vpc.get.id: Required value",
		},
		{
			name: "packagesNotStrings",
			body: `
program:
  packages:
    terraform-provider: {source: hashicorp/random}`,
			want: "program.packages.terraform-provider: Invalid value: \"object\"",
		},
	}
	runInvalid(t, "pulumi.com/v1", "Program", cases)
}

func TestUpdate_Create_RejectsInvalid(t *testing.T) {
	cases := []invalidCase{
		{
			name: "badType",
			body: `
spec:
  stackName: files
  type: apply`,
			want: `spec.type: Unsupported value: "apply"`,
		},
		{
			name: "missingType",
			body: `
spec:
  stackName: files`,
			want: "spec.type: Required value",
		},
		{
			name: "missingStackName",
			body: `
spec:
  type: up`,
			want: "spec.stackName: Required value",
		},
		{
			name: "zeroAttempt",
			body: `
spec:
  stackName: files
  type: up
  attempt: 0`,
			want: "spec.attempt: Invalid value: 0",
		},
	}
	runInvalid(t, "stackwright.dev/v1alpha1", "Update", cases)
}

// An Update's spec cannot change once created (a retry is a new Update), while its
// metadata and status can.
func TestUpdate_Update_RejectsSpecMutation(t *testing.T) {
	ctx := testContext(t)
	ns := env.Namespace(t)
	u := &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: "files-up-1", Namespace: ns},
		Spec: v1alpha1.UpdateSpec{
			StackName: "files",
			Type:      v1alpha1.UpdateTypeUp,
			Revision:  "abc123",
			Attempt:   1,
			Options:   &v1alpha1.UpdateOptions{Refresh: true},
		},
	}
	if err := env.Client.Create(ctx, u); err != nil {
		t.Fatalf("failed to create Update: %v", err)
	}

	mutations := []struct {
		name   string
		mutate func(*v1alpha1.UpdateSpec)
	}{
		{"type", func(s *v1alpha1.UpdateSpec) { s.Type = v1alpha1.UpdateTypeDestroy }},
		{"revision", func(s *v1alpha1.UpdateSpec) { s.Revision = "def456" }},
		{"attempt", func(s *v1alpha1.UpdateSpec) { s.Attempt = 2 }},
		{"options", func(s *v1alpha1.UpdateSpec) { s.Options.Targets = []string{"urn:pulumi:dev::p::t::n"} }},
		{"optionsRemoved", func(s *v1alpha1.UpdateSpec) { s.Options = nil }},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			changed := u.DeepCopy()
			m.mutate(&changed.Spec)
			err := env.Client.Update(ctx, changed)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("changing spec.%s returned %v; want Invalid", m.name, err)
			}
			if want := "spec: Invalid value: spec is immutable; create a new Update instead"; !strings.Contains(err.Error(), want) {
				t.Errorf("changing spec.%s returned %q; want it to contain %q", m.name, err, want)
			}
		})
	}

	labelled := u.DeepCopy()
	labelled.Labels = map[string]string{v1alpha1.StackLabel: "files"}
	if err := env.Client.Update(ctx, labelled); err != nil {
		t.Errorf("changing only the labels returned %v; want success", err)
	}
	labelled.Status = v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseRunning, Runner: "local/test/1"}
	if err := env.Client.Status().Update(ctx, labelled); err != nil {
		t.Errorf("updating the status returned %v; want success", err)
	}
}

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
  githubApp: {appId: "12345", installationId: "678", privateKey: {type: Secret, secret: {name: app, key: pem}}}`},
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

// Free-form JSON (config values, workspace and update templates) survives storage exactly,
// through the typed API (apiextensionsv1.JSON) and through unstructured objects.
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
			}},
			"futureField": {"count": 2, "ratio": 0.75, "on": true}
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
				WorkspaceTemplate: rawJSON(t, workspaceTemplate),
				UpdateTemplate:    rawJSON(t, updateTemplate),
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

// A Program's free-form parts (properties, variables, outputs, defaults, get state,
// resource-valued options) survive storage exactly, typed and unstructured.
func TestProgram_Create_RoundTripsFreeFormJSON(t *testing.T) {
	program := `{
		"configuration": {
			"replicas": {"type": "Int", "default": 2},
			"ratio": {"type": "Number", "default": 0.5},
			"zones": {"type": "List<String>", "default": ["a", "b"]},
			"debug": {"type": "Boolean"},
			"name": {"default": "web"}
		},
		"variables": {
			"ami": {"fn::invoke": {"function": "aws:ec2:getAmi", "arguments": {"mostRecent": true, "owners": ["137112412989"], "filters": [{"name": "name", "values": ["amzn2-ami-hvm-*"]}]}, "return": "id"}},
			"count": 3,
			"flags": [true, false]
		},
		"resources": {
			"group": {
				"type": "aws:ec2:SecurityGroup",
				"properties": {
					"description": "Enable HTTP access",
					"ingress": [{"protocol": "tcp", "fromPort": 80, "toPort": 80, "cidrBlocks": ["0.0.0.0/0"]}],
					"tags": {"team": "infra", "nested": {"deep": [1, 2.5, {"x": "y"}]}}
				},
				"options": {"protect": true, "ignoreChanges": ["tags"], "customTimeouts": {"create": "5m"}, "aliases": ["urn:pulumi:dev::p::aws:ec2/securityGroup:SecurityGroup::old", {"name": "older"}]}
			},
			"server": {
				"type": "aws:ec2:Instance",
				"properties": {"ami": "${ami}", "instanceType": "t2.micro", "vpcSecurityGroupIds": ["${group.id}"], "userDataReplaceOnChange": true, "rootBlockDevice": {"volumeSize": 20}},
				"options": {"dependsOn": ["${group}"], "provider": "${east}", "providers": {"aws": "${east}"}, "parent": "${group}", "deletedWith": "${group}", "version": "6.0.0"}
			},
			"east": {"type": "pulumi:providers:aws", "properties": {"region": "us-east-1"}},
			"vpc": {"type": "aws:ec2:Vpc", "get": {"id": "vpc-123", "state": {"cidrBlock": "10.0.0.0/16", "tags": {"a": "b"}}}}
		},
		"outputs": {
			"publicIp": "${server.publicIp}",
			"summary": {"ip": "${server.publicIp}", "ports": [80, 443], "secure": false},
			"count": 3
		},
		"packages": {"terraform-provider": "terraform-provider hashicorp/random 3.6.0"}
	}`

	t.Run("typed", func(t *testing.T) {
		ctx := testContext(t)
		ns := env.Namespace(t)
		in := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "typed", Namespace: ns}}
		if err := json.Unmarshal([]byte(program), &in.Program); err != nil {
			t.Fatal(err)
		}
		want := in.Program.DeepCopy()
		if err := env.Client.Create(ctx, in); err != nil {
			t.Fatalf("failed to create Program: %v", err)
		}
		got := &pulumiv1.Program{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(in), got); err != nil {
			t.Fatalf("failed to get Program: %v", err)
		}
		if diff := cmp.Diff(*want, got.Program, jsonByValue); diff != "" {
			t.Errorf("program changed in storage (-sent +stored):\n%s", diff)
		}
	})

	t.Run("unstructured", func(t *testing.T) {
		ctx := testContext(t)
		ns := env.Namespace(t)
		obj := newObject("pulumi.com/v1", "Program", ns, "unstructured")
		obj.Object["program"] = decodeJSON(t, program)
		want := runtime.DeepCopyJSONValue(obj.Object["program"])
		if err := env.Client.Create(ctx, obj, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			t.Fatalf("failed to create Program: %v", err)
		}
		got := newObject("pulumi.com/v1", "Program", ns, "unstructured")
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatalf("failed to get Program: %v", err)
		}
		if diff := cmp.Diff(want, got.Object["program"]); diff != "" {
			t.Errorf("program changed in storage (-sent +stored):\n%s", diff)
		}
	})
}

// runInvalid creates each case as an object of the given kind and requires an Invalid error
// whose message contains the case's substring.
func runInvalid(t *testing.T, apiVersion, kind string, cases []invalidCase) {
	t.Helper()
	ctx := testContext(t)
	ns := env.Namespace(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body map[string]any
			if err := yaml.Unmarshal([]byte(tc.body), &body); err != nil {
				t.Fatalf("bad test case: %v", err)
			}
			obj := newObject(apiVersion, kind, ns, strings.ToLower(tc.name))
			for k, v := range body {
				if k != "metadata" {
					obj.Object[k] = v
				}
			}
			err := env.Client.Create(ctx, obj)
			if err == nil {
				t.Fatalf("%s was accepted; want it refused with %q", kind, tc.want)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v; want an Invalid error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %q; want it to contain %q", err, tc.want)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// jsonByValue compares apiextensionsv1.JSON by the JSON value it holds, so that
// insignificant differences (key order, spacing) do not count but any change of value,
// including 3 becoming 3.0, does.
var jsonByValue = cmp.Transformer("JSONValue", func(j apiextensionsv1.JSON) any {
	d := json.NewDecoder(bytes.NewReader(j.Raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "invalid JSON: " + string(j.Raw)
	}
	return v
})

func rawJSON(t *testing.T, s string) *apiextensionsv1.JSON {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		t.Fatalf("bad JSON %s: %v", s, err)
	}
	return &apiextensionsv1.JSON{Raw: buf.Bytes()}
}

// decodeJSON decodes s the way the API machinery does: integers as int64, other numbers as
// float64.
func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"X","v":` + s + `}`)); err != nil {
		t.Fatalf("bad JSON %s: %v", s, err)
	}
	return u.Object["v"]
}

func newObject(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// userField is the top-level field holding what the user wrote for Stackwright's kinds.
func userField(kind string) (string, bool) {
	switch kind {
	case "Stack", "Update":
		return "spec", true
	case "Program":
		return "program", true
	}
	return "", false
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// readDocs splits a YAML file into its documents, skipping empty and comment-only ones.
func readDocs(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []*unstructured.Unstructured
	for i, doc := range docSeparator.Split(string(b), -1) {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, i, err)
		}
		if string(j) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatalf("%s: document %d: %v", path, i, err)
		}
		docs = append(docs, u)
	}
	return docs
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// warningRecorder collects the warnings the API server returns.
type warningRecorder struct {
	mu    sync.Mutex
	texts []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

func (w *warningRecorder) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.texts)
}

// warningClient returns a client whose API server warnings are recorded.
func warningClient(t *testing.T) (*warningRecorder, client.Client) {
	t.Helper()
	w := &warningRecorder{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return w, c
}

func ptr[T any](v T) *T { return &v }
