package v1

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func TestSourceKind(t *testing.T) {
	cases := []struct {
		name string
		spec StackSpec
		want SourceKind
	}{
		{"none", StackSpec{}, ""},
		{"git", StackSpec{GitSource: GitSource{ProjectRepo: "https://example.com/r.git"}}, SourceKindGit},
		{"flux", StackSpec{FluxSource: &FluxSource{}}, SourceKindFlux},
		{"program", StackSpec{ProgramRef: &ProgramReference{Name: "p"}}, SourceKindProgram},
		{"git and program", StackSpec{
			GitSource:  GitSource{ProjectRepo: "https://example.com/r.git"},
			ProgramRef: &ProgramReference{Name: "p"},
		}, ""},
		{"empty repo is no source", StackSpec{GitSource: GitSource{Commit: "abc"}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.spec.SourceKind(); got != tc.want {
				t.Errorf("SourceKind() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSuspended(t *testing.T) {
	if (&StackSpec{}).Suspended() {
		t.Error("empty spec reported suspended")
	}
	if (&StackSpec{Stackwright: &StackwrightSpec{}}).Suspended() {
		t.Error("suspend=false reported suspended")
	}
	if !(&StackSpec{Stackwright: &StackwrightSpec{Suspend: true}}).Suspended() {
		t.Error("suspend=true not reported")
	}
}

func TestReconcileRequest(t *testing.T) {
	s := &Stack{}
	if s.ReconcileRequest() != "" || s.ReconcileRequested() {
		t.Fatal("no annotation should mean no request")
	}
	s.Annotations = map[string]string{ReconcileRequestAnnotation: "2024-01-01T00:00:00Z"}
	if got := s.ReconcileRequest(); got != "2024-01-01T00:00:00Z" {
		t.Fatalf("ReconcileRequest() = %q", got)
	}
	if !s.ReconcileRequested() {
		t.Fatal("new request not reported")
	}
	s.Status.ObservedReconcileRequest = "2024-01-01T00:00:00Z"
	if s.ReconcileRequested() {
		t.Fatal("handled request reported again")
	}
}

// The manifests below are PKO manifests from the compatibility seeds (EC2
// Program + Stack, nginx Stack). They must decode strictly into our types and
// survive a round trip unchanged.
const seedProgram = `
apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: ec2-instance
program:
  resources:
    group:
      type: aws:ec2:SecurityGroup
      properties:
        description: Enable HTTP access
        ingress:
          - protocol: tcp
            fromPort: 80
            toPort: 80
            cidrBlocks: ["0.0.0.0/0"]
    server:
      type: aws:ec2:Instance
      properties:
        ami: ami-6869aa05
        instanceType: t2.micro
        vpcSecurityGroupIds: ${group.name}
  outputs:
    publicIp: ${server.publicIp}
    publicDns: ${server.publicDns}
`

const seedStacks = `
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: dev-ec2-instance
spec:
  stack: squaremo/ec2-instance/dev
  programRef:
    name: ec2-instance
  destroyOnFinalize: true
  config:
    aws:region: us-east-1
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: my-stack
spec:
  envRefs:
    PULUMI_ACCESS_TOKEN:
      type: Secret
      secret:
        name: accesstoken
        key: accessToken
  accessTokenSecret: accesstoken
  stack: org/nginx/dev
  projectRepo: https://github.com/metral/pulumi-nginx
  commit: 2b0889718d3e63feeb6079ccd5e4488d8601e353
  destroyOnFinalize: true
`

func TestSeedManifestsRoundTrip(t *testing.T) {
	var p Program
	roundTrip(t, seedProgram, &p)
	if got := p.Program.Resources["server"].Type; got != "aws:ec2:Instance" {
		t.Errorf("server type = %q", got)
	}

	docs := splitYAML(seedStacks)
	var ec2, nginx Stack
	roundTrip(t, docs[0], &ec2)
	roundTrip(t, docs[1], &nginx)
	if ec2.Spec.SourceKind() != SourceKindProgram {
		t.Errorf("ec2 source = %q", ec2.Spec.SourceKind())
	}
	if string(ec2.Spec.Config["aws:region"].Raw) != `"us-east-1"` {
		t.Errorf("config = %s", ec2.Spec.Config["aws:region"].Raw)
	}
	if nginx.Spec.SourceKind() != SourceKindGit || nginx.Spec.Commit == "" {
		t.Errorf("nginx source = %q commit %q", nginx.Spec.SourceKind(), nginx.Spec.Commit)
	}
	ref := nginx.Spec.EnvRefs["PULUMI_ACCESS_TOKEN"]
	if ref.Type != ResourceSelectorSecret || ref.Secret == nil || ref.Secret.Key != "accessToken" {
		t.Errorf("envRefs = %+v", ref)
	}
}

// TestPreservedFieldsRoundTrip checks that free-form PKO content (structured
// config, workspaceTemplate, updateTemplate) survives decode and encode.
func TestPreservedFieldsRoundTrip(t *testing.T) {
	const doc = `
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: s
spec:
  stack: dev
  fluxSource:
    sourceRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: repo}
    dir: infra
  config:
    app:replicas: 3
    app:tags: [a, b]
    app:settings: {debug: true, nested: {x: 1.5}}
  workspaceTemplate:
    metadata: {labels: {team: a}}
    spec:
      image: pulumi/pulumi:3.100.0-nonroot
      podTemplate: {spec: {containers: [{name: pulumi, resources: {limits: {memory: 1Gi}}}]}}
  updateTemplate:
    spec: {ttlAfterCompleted: 1h, parallel: 8}
  workspaceReclaimPolicy: Delete
  prerequisites:
    - name: base
      requirement: {succeededWithinDuration: 1h}
  driftDetection:
    schedules: [{cron: "*/15 * * * *", autoRemediate: true}]
  stackwright:
    suspend: true
`
	var s Stack
	roundTrip(t, doc, &s)
	if d, err := s.Spec.Prerequisites[0].SucceededWithin(); err != nil || d != time.Hour {
		t.Errorf("succeededWithinDuration = %v, %v", d, err)
	}
	if !s.Spec.Suspended() {
		t.Error("suspend lost")
	}
	// DeepCopy must produce an equal, independent object.
	c := s.DeepCopy()
	if !reflect.DeepEqual(&s, c) {
		t.Fatal("DeepCopy differs from original")
	}
	c.Spec.Config["app:replicas"].Raw[0] = '9'
	if string(s.Spec.Config["app:replicas"].Raw) != "3" {
		t.Error("DeepCopy shares config bytes")
	}
	c.Spec.Stackwright.Suspend = false
	if !s.Spec.Suspended() {
		t.Error("DeepCopy shares stackwright")
	}
}

func TestStatusDeepCopy(t *testing.T) {
	now := metav1.Now()
	st := StackStatus{
		Conditions:    []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonProcessingCompleted}},
		LastUpdate:    &StackUpdateState{State: UpdateStateSucceeded, LastResyncTime: &now},
		CurrentUpdate: &CurrentStackUpdate{Name: "u"},
	}
	c := st.DeepCopy()
	if !reflect.DeepEqual(&st, c) {
		t.Fatal("DeepCopy differs from original")
	}
	c.Conditions[0].Reason = "x"
	c.LastUpdate.LastResyncTime.Time = now.Add(1)
	c.CurrentUpdate.Name = "v"
	if st.Conditions[0].Reason != ReasonProcessingCompleted || !st.LastUpdate.LastResyncTime.Equal(&now) || st.CurrentUpdate.Name != "u" {
		t.Error("DeepCopy shares status memory")
	}
}

// roundTrip decodes doc strictly into obj (unknown fields are an error, as
// with kubectl's strict field validation), re-encodes it and checks the result
// equals the input.
func roundTrip(t *testing.T, doc string, obj any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		t.Fatalf("strict decode: %v", err)
	}
	out, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	var want, got map[string]any
	if err := yaml.Unmarshal([]byte(doc), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	// Fields we add on encode that the input did not have.
	delete(got, "status")
	if md, ok := got["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("round trip changed the object:\nwant %v\ngot  %v", want, got)
	}
}

func splitYAML(s string) []string {
	return strings.Split(s, "\n---\n")
}

func TestAddToScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Stack", "StackList", "Program", "ProgramList"} {
		if !s.Recognizes(GroupVersion.WithKind(kind)) {
			t.Errorf("scheme does not know %s", kind)
		}
	}
}

func TestStackSpec_ResyncPeriod_AppliesPKODefaultsAndFloor(t *testing.T) {
	tests := []struct {
		name string
		spec StackSpec
		want time.Duration
	}{
		{name: "pinnedCommitNeverPolls", spec: StackSpec{GitSource: GitSource{Commit: "abc"}}},
		{name: "branchDefaultsToPKOsMinute", spec: StackSpec{GitSource: GitSource{Branch: "main"}}, want: time.Minute},
		{name: "lowValueRaisedToFloor", spec: StackSpec{GitSource: GitSource{Branch: "main"}, ResyncFrequencySeconds: 2}, want: 10 * time.Second},
		{name: "belowPKOFloorAllowed", spec: StackSpec{GitSource: GitSource{Branch: "main"}, ResyncFrequencySeconds: 15}, want: 15 * time.Second},
		{name: "continueResyncDefaults", spec: StackSpec{ContinueResyncOnCommitMatch: true}, want: time.Minute},
		{name: "explicitOnProgram", spec: StackSpec{ResyncFrequencySeconds: 300}, want: 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.spec.ResyncPeriod(); got != tt.want {
				t.Errorf("resyncPeriod() = %v; want %v", got, tt.want)
			}
		})
	}
}
