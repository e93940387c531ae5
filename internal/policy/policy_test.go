package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/engine"
)

const protectedDeletes = `package guardrails

deny contains msg if {
	some step in input.steps
	step.op in {"delete", "replace"}
	step.protected
	msg := sprintf("%s would %s protected resource %s", [input.stack.name, step.op, step.urn])
}
`

const ownerLabel = `package labels

deny contains "Stacks need an owner label" if {
	not input.stack.labels.owner
}

deny contains msg if {
	some step in input.steps
	step.op == "create"
	not step.inputs.tags.team
	msg := sprintf("%s has no tags.team", [step.urn])
}
`

func input(labels map[string]string, steps ...engine.Step) Input {
	return Input{Stack: Stack{Name: "web", Namespace: "team-a", Labels: labels, Revision: "abc"}, Steps: steps}
}

func TestEvaluator_Evaluate_Policies(t *testing.T) {
	t.Parallel()
	del := engine.Step{Op: "delete", URN: "urn:pulumi:dev::p::t::db", Protected: true}
	create := engine.Step{Op: "create", URN: "urn:pulumi:dev::p::t::bucket", Inputs: map[string]any{"tags": map[string]any{"team": "a"}}}
	untagged := engine.Step{Op: "create", URN: "urn:pulumi:dev::p::t::cache", Inputs: map[string]any{"size": 1}}
	tests := []struct {
		name    string
		src     Source
		in      Input
		want    []v1alpha1.PolicyViolation
		wantErr string
	}{
		{
			name: "MandatoryDenyOfProtectedDelete",
			src:  Source{Name: "Policy a/protect", Enforcement: v1alpha1.EnforcementMandatory, Rego: protectedDeletes},
			in:   input(nil, del, create),
			want: []v1alpha1.PolicyViolation{{Policy: "Policy a/protect", Enforcement: "mandatory", Message: "web would delete protected resource urn:pulumi:dev::p::t::db"}},
		},
		{
			name: "UnprotectedDeleteAllowed",
			src:  Source{Name: "Policy a/protect", Enforcement: v1alpha1.EnforcementMandatory, Rego: protectedDeletes},
			in:   input(nil, engine.Step{Op: "delete", URN: "urn:x"}),
		},
		{
			name: "AdvisoryLabelAndTagMissing",
			src:  Source{Name: "ClusterPolicy owners", Enforcement: v1alpha1.EnforcementAdvisory, Rego: ownerLabel},
			in:   input(nil, create, untagged),
			want: []v1alpha1.PolicyViolation{
				{Policy: "ClusterPolicy owners", Enforcement: "advisory", Message: "Stacks need an owner label"},
				{Policy: "ClusterPolicy owners", Enforcement: "advisory", Message: "urn:pulumi:dev::p::t::cache has no tags.team"},
			},
		},
		{
			name: "LabelAndTagsPresent",
			src:  Source{Name: "ClusterPolicy owners", Enforcement: v1alpha1.EnforcementAdvisory, Rego: ownerLabel},
			in:   input(map[string]string{"owner": "ops"}, create),
		},
		{
			name:    "SyntaxErrorIsAnError",
			src:     Source{Name: "Policy a/broken", Enforcement: v1alpha1.EnforcementAdvisory, Rego: "package broken\n\ndeny contains msg if {\n  msg := \n}\n"},
			in:      input(nil, create),
			wantErr: "rego_parse_error",
		},
		{
			name:    "NoDenyRuleIsAnError",
			src:     Source{Name: "Policy a/empty", Rego: "package empty\n\nallow := true\n"},
			in:      input(nil),
			wantErr: `defines no "deny" rule`,
		},
		{
			name:    "HTTPSendRefused",
			src:     Source{Name: "Policy a/exfil", Rego: "package exfil\n\ndeny contains x if {\n  x := http.send({\"method\": \"get\", \"url\": \"http://127.0.0.1:1/\"}).body\n}\n"},
			in:      input(nil),
			wantErr: "http.send",
		},
		{
			name:    "RuntimeRefused",
			src:     Source{Name: "Policy a/env", Rego: "package env\n\ndeny contains x if {\n  x := opa.runtime().env.HOME\n}\n"},
			in:      input(nil),
			wantErr: "opa.runtime",
		},
		{
			name:    "DenyNotASet",
			src:     Source{Name: "Policy a/scalar", Rego: "package scalar\n\ndeny := \"no\"\n"},
			in:      input(nil),
			wantErr: "not a set of messages",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.src.Version = tt.name
			got := NewEvaluator().Evaluate(t.Context(), []Source{tt.src}, tt.in)
			if diff := cmp.Diff([]string{tt.src.Name}, got.Evaluated); diff != "" {
				t.Errorf("evaluated (-want +got):\n%s", diff)
			}
			if tt.wantErr != "" {
				if len(got.Errors) != 1 || !strings.Contains(got.Errors[0].Message, tt.wantErr) || got.Errors[0].Policy != tt.src.Name {
					t.Fatalf("errors = %+v; want one of %s mentioning %q", got.Errors, tt.src.Name, tt.wantErr)
				}
				if !got.Blocking() {
					t.Error("a policy that cannot be judged does not block")
				}
				return
			}
			if len(got.Errors) > 0 {
				t.Fatalf("errors = %+v", got.Errors)
			}
			if diff := cmp.Diff(tt.want, got.Violations); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvaluator_Evaluate_CompilesEachVersionOnce(t *testing.T) {
	t.Parallel()
	e := NewEvaluator()
	src := Source{Name: "Policy a/p", Enforcement: v1alpha1.EnforcementMandatory, Rego: protectedDeletes, Version: "uid/1"}
	for range 3 {
		e.Evaluate(t.Context(), []Source{src}, input(nil))
	}
	first := e.compiled[src.Name]
	if len(e.compiled) != 1 || first.version != "uid/1" {
		t.Fatalf("compiled = %+v; want the one version", e.compiled)
	}
	// A new generation replaces the module kept for the policy, and a broken one is judged
	// as broken, not by the module it replaced.
	src.Version, src.Rego = "uid/2", "package p\n\ndeny contains msg if {\n\tmsg := \n}\n"
	if got := e.Evaluate(t.Context(), []Source{src}, input(nil)); len(got.Errors) != 1 {
		t.Errorf("errors of the broken generation = %+v; want one", got.Errors)
	}
	if len(e.compiled) != 1 || e.compiled[src.Name].version != "uid/2" {
		t.Errorf("compiled = %+v; want only generation 2", e.compiled)
	}
}

func TestKey_OrderInsensitiveAndVersioned(t *testing.T) {
	t.Parallel()
	a, b := Source{Version: "a/1"}, Source{Version: "b/1"}
	if Key([]Source{a, b}) != Key([]Source{b, a}) {
		t.Error("Key depends on order")
	}
	if Key([]Source{a}) == Key([]Source{{Version: "a/2"}}) {
		t.Error("Key ignores a new generation")
	}
	if Key(nil) != "" {
		t.Error("no policies have a key")
	}
}
