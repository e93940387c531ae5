package console

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

func TestOutputs_StatusOutputs_SecretsMaskedAndSorted(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]apiextensionsv1.JSON
		want []output
	}{
		{name: "none", in: nil, want: []output{}},
		{
			name: "plain and secret",
			in: map[string]apiextensionsv1.JSON{
				"url":   {Raw: []byte(`"https://example.com"`)},
				"token": {Raw: []byte(`"[secret]"`)},
				"ports": {Raw: []byte(`[ 80,  443 ]`)},
			},
			want: []output{{Name: "ports", Value: `[80,443]`}, {Name: "token", Secret: true}, {Name: "url", Value: `"https://example.com"`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, outputs(tt.in)); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSpecSummary_Stack_NoSecretsNorCredentials(t *testing.T) {
	tests := []struct {
		name string
		spec pulumiv1.StackSpec
		want []field
	}{
		{
			name: "git with credentials in the address and inline secrets",
			spec: pulumiv1.StackSpec{
				Stack:     "dev",
				GitSource: pulumiv1.GitSource{ProjectRepo: "https://user:hunter2@git.example/app.git", Branch: "main", RepoDir: "infra"},
				Secrets:   map[string]string{"password": "hunter2"},
				Config:    map[string]apiextensionsv1.JSON{"size": {Raw: []byte(`"hunter2"`)}},
			},
			want: []field{{"Stack", "dev"}, {"Source", "https://git.example/app.git@main (infra)"}, {"Approval", "Auto"},
				{"Suspended", "no"}, {"TTL", "none"}, {"Destroy on delete", "no"}, {"Refresh", "no"}},
		},
		{
			name: "program, manual approval, suspended",
			spec: pulumiv1.StackSpec{
				Stack: "prod", ProgramRef: &pulumiv1.ProgramReference{Name: "web"}, DestroyOnFinalize: true,
				Stackwright: &pulumiv1.StackwrightSpec{Approval: pulumiv1.ApprovalManual, Suspend: true},
			},
			want: []field{{"Stack", "prod"}, {"Source", "Program web"}, {"Approval", "Manual"},
				{"Suspended", "yes"}, {"TTL", "none"}, {"Destroy on delete", "yes"}, {"Refresh", "no"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, specSummary(&pulumiv1.Stack{Spec: tt.spec})); diff != "" {
				t.Errorf("specSummary (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewPlanView_Preview_StepsGroupedByOperation(t *testing.T) {
	const prefix = "urn:pulumi:dev::app::"
	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web"}}
	a := &pulumiv1.ApprovalStatus{Preview: "web-preview-1", State: pulumiv1.ApprovalAwaiting, Summary: "1 to create"}
	p := &v1alpha1.Update{Status: v1alpha1.UpdateStatus{Steps: []v1alpha1.UpdateStep{
		{Op: "delete", URN: prefix + "x:File::old"},
		{Op: "import", URN: prefix + "x:File::imported"},
		{Op: "update", URN: prefix + "x:File::b", Changed: []string{"content"}},
		{Op: "create", URN: prefix + "x:File::new"},
		{Op: "replace", URN: prefix + "x:File::moved", Changed: []string{"path"}, Replacing: []string{"path"}},
		{Op: "update", URN: prefix + "x:File::a", Changed: []string{"mode"}},
	}}}
	got := newPlanView(st, a, p)
	want := []planGroup{
		{Op: "create", Steps: []planStep{{Op: "create", URN: prefix + "x:File::new", Name: "new"}}},
		{Op: "update", Steps: []planStep{
			{Op: "update", URN: prefix + "x:File::a", Name: "a", Changed: []string{"mode"}},
			{Op: "update", URN: prefix + "x:File::b", Name: "b", Changed: []string{"content"}},
		}},
		{Op: "replace", Steps: []planStep{{Op: "replace", URN: prefix + "x:File::moved", Name: "moved", Changed: []string{"path"}, Replacing: []string{"path"}}}},
		{Op: "delete", Steps: []planStep{{Op: "delete", URN: prefix + "x:File::old", Name: "old"}}},
		{Op: "import", Steps: []planStep{{Op: "import", URN: prefix + "x:File::imported", Name: "imported"}}},
	}
	if diff := cmp.Diff(want, got.Groups); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
	if !got.Decidable {
		t.Error("a change awaiting approval is not decidable")
	}
}
