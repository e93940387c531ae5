package v1_test

import (
	"strings"
	"testing"
)

func TestStack_Create_RejectsInvalid(t *testing.T) {
	cases := []invalidCase{
		{
			name: "missingStack",
			body: `
spec:
  programRef: {name: prog}`,
			want: "spec.stack: Required value",
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
