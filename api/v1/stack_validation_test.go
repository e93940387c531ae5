package v1_test

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// reviewCase is a manifest PKO's CRDs admit that Stackwright admits too, but cannot run as
// written (problem: the Stack stalls) or partly ignores (ignored).
type reviewCase struct {
	name string
	body string
	// kind is "problem" or "ignored"; want is a substring of the finding.
	kind, want string
}

var reviewCases = []reviewCase{
	{
		name: "twoSources",
		kind: "problem", want: `spec sets 2 sources`,
		body: `
spec:
  stack: dev
  projectRepo: https://example.com/repo.git
  commit: abc123
  programRef: {name: prog}`,
	},
	{
		name: "threeSources",
		kind: "problem", want: `spec sets 3 sources`,
		body: `
spec:
  stack: dev
  projectRepo: https://example.com/repo.git
  branch: main
  programRef: {name: prog}
  fluxSource: {sourceRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: repo}}`,
	},
	{
		name: "commitAndBranch",
		kind: "problem", want: `spec.commit and spec.branch are both set`,
		body: `
spec:
  stack: dev
  projectRepo: https://example.com/repo.git
  commit: abc123
  branch: main`,
	},
	{
		name: "projectRepoWithoutCommitOrBranch",
		kind: "problem", want: `spec.projectRepo needs spec.commit or spec.branch`,
		body: `
spec:
  stack: dev
  projectRepo: https://example.com/repo.git`,
	},
	{
		name: "commitWithoutRepo",
		kind: "ignored", want: `spec.commit and spec.branch are ignored`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  commit: abc123`,
	},
	{
		name: "branchWithoutRepo",
		kind: "ignored", want: `spec.commit and spec.branch are ignored`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  branch: main`,
	},
	{
		name: "repoDirWithFluxSource",
		kind: "ignored", want: `spec.repoDir is ignored`,
		body: `
spec:
  stack: dev
  fluxSource: {sourceRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: repo}}
  repoDir: stacks/dev`,
	},
	{
		name: "shallowWithoutRepo",
		kind: "ignored", want: `spec.shallow is ignored`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  shallow: true`,
	},
	{
		name: "gitAuthWithoutRepo",
		kind: "ignored", want: `spec.gitAuth and spec.gitAuthSecret are ignored`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  gitAuth:
    accessToken: {type: Secret, secret: {name: git, key: token}}`,
	},
	{
		name: "gitAuthSecretWithoutRepo",
		kind: "ignored", want: `spec.gitAuth and spec.gitAuthSecret are ignored`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  gitAuthSecret: git`,
	},
	{
		name: "emptyStack",
		kind: "problem", want: `spec.stack is empty`,
		body: `
spec:
  stack: ""
  programRef: {name: prog}`,
	},
	{
		name: "missingSpec",
		kind: "problem", want: `spec.stack is empty`,
		body: `
metadata: {}`,
	},
	{
		name: "wrongEnvRefType",
		kind: "problem", want: `spec.envRefs[AWS_REGION]: type "ConfigMap" is not one of Env, FS, Secret, Literal`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  envRefs:
    AWS_REGION: {type: ConfigMap, literal: {value: us-east-1}}`,
	},
	{
		name: "secretEnvRefWithoutSecret",
		kind: "problem", want: `spec.envRefs[PULUMI_ACCESS_TOKEN]: type Secret needs secret.name and secret.key`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  envRefs:
    PULUMI_ACCESS_TOKEN: {type: Secret, literal: {value: oops}}`,
	},
	{
		name: "envEnvRefWithoutEnv",
		kind: "problem", want: `spec.envRefs[HOME]: type Env needs env.name`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  envRefs:
    HOME: {type: Env}`,
	},
	{
		name: "fsSecretsRefWithoutFilesystem",
		kind: "problem", want: `spec.secretsRef[dbPassword]: type FS needs filesystem.path`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  secretsRef:
    dbPassword: {type: FS}`,
	},
	{
		name: "literalSecretsRefWithoutLiteral",
		kind: "problem", want: `spec.secretsRef[dbPassword]: type Literal needs literal.value`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  secretsRef:
    dbPassword: {type: Literal}`,
	},
	{
		name: "negativeResync",
		kind: "ignored", want: `spec.resyncFrequencySeconds is negative`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  resyncFrequencySeconds: -1`,
	},
	{
		name: "negativeRetryBackoff",
		kind: "ignored", want: `spec.retryMaxBackoffDurationSeconds is negative`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  retryMaxBackoffDurationSeconds: -30`,
	},
	{
		name: "prerequisiteEmptyName",
		kind: "problem", want: `spec.prerequisites[1].name is empty`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  prerequisites:
    - name: network
    - name: ""`,
	},
	{
		name: "badPrerequisiteDuration",
		kind: "problem", want: `spec.prerequisites[0].requirement.succeededWithinDuration: "an hour" is not a duration`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  prerequisites:
    - name: network
      requirement: {succeededWithinDuration: an hour}`,
	},
	{
		name: "negativePrerequisiteDuration",
		kind: "problem", want: `spec.prerequisites[0].requirement.succeededWithinDuration: "-1h" is negative`,
		body: `
spec:
  stack: dev
  programRef: {name: prog}
  prerequisites:
    - name: network
      requirement: {succeededWithinDuration: -1h}`,
	},
	{
		name: "programRefEmptyName",
		kind: "problem", want: `spec.programRef.name is empty`,
		body: `
spec:
  stack: dev
  programRef: {name: ""}`,
	},
	{
		name: "gitAuthEmpty",
		kind: "problem", want: `spec.gitAuth sets none of`,
		body: `
spec:
  stack: dev
  projectRepo: https://example.com/repo.git
  branch: main
  gitAuth: {}`,
	},
}

// Admission lets these through, as PKO's does, and Review says what is wrong with them.
func TestStackSpec_Review_FindsWhatAdmissionLetsThrough(t *testing.T) {
	for _, tc := range reviewCases {
		t.Run(tc.name, func(t *testing.T) {
			r := reviewOf(t, tc.body)
			got := map[string][]string{"problem": r.Problems, "ignored": r.Ignored}
			if n := len(r.Problems) + len(r.Ignored); n != 1 {
				t.Errorf("review %+v has %d findings; want exactly the %s %q", r, n, tc.kind, tc.want)
			}
			if !slicesContainSubstring(got[tc.kind], tc.want) {
				t.Errorf("review %+v; want a %s containing %q", r, tc.kind, tc.want)
			}
		})
	}
}

// reviewOf decodes a case's spec the way the manager's client would.
func reviewOf(t *testing.T, body string) pulumiv1.SpecReview {
	t.Helper()
	var obj struct {
		Spec pulumiv1.StackSpec `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(body), &obj); err != nil {
		t.Fatalf("bad test case: %v", err)
	}
	return obj.Spec.Review()
}

func slicesContainSubstring(ss []string, sub string) bool {
	for _, s := range ss {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
