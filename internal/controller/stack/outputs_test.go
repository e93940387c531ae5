package stack

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/utils/ptr"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

func TestExportValues_Encode(t *testing.T) {
	cases := []struct {
		name   string
		data   map[string][]byte
		secret map[string]bool
		want   exportedOutputs
	}{
		{
			name: "stringsAsTextOthersAsJSON",
			data: map[string][]byte{"s": []byte(`"text"`), "n": []byte(`3`), "o": []byte(`{"a":[1,2]}`), "b": []byte(`true`), "null": []byte(`null`)},
			want: exportedOutputs{
				all:    map[string]string{"s": "text", "n": "3", "o": `{"a":[1,2]}`, "b": "true", "null": "null"},
				public: map[string]string{"s": "text", "n": "3", "o": `{"a":[1,2]}`, "b": "true", "null": "null"},
			},
		},
		{
			name:   "secretOutputsOnlyInTheSecret",
			data:   map[string][]byte{"token": []byte(`"s3cr3t"`), "url": []byte(`"https://x"`)},
			secret: map[string]bool{"token": true},
			want: exportedOutputs{
				all:    map[string]string{"token": "s3cr3t", "url": "https://x"},
				public: map[string]string{"url": "https://x"},
			},
		},
		{
			name: "namesThatCannotBeKeysAreSkipped",
			data: map[string][]byte{"ok.name_1-x": []byte(`"v"`), "has space": []byte(`"v"`), "a/b": []byte(`"v"`)},
			want: exportedOutputs{
				all:     map[string]string{"ok.name_1-x": "v"},
				public:  map[string]string{"ok.name_1-x": "v"},
				skipped: []string{"a/b", "has space"},
			},
		},
		{
			name: "noOutputs",
			want: exportedOutputs{all: map[string]string{}, public: map[string]string{}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := exportValues(tc.data, tc.secret)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(exportedOutputs{})); diff != "" {
				t.Errorf("exportValues (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNotApplied_List(t *testing.T) {
	outputs := &pulumiv1.StackwrightSpec{Outputs: &pulumiv1.OutputsExport{ConfigMapName: "out"}}
	cases := []struct {
		name       string
		spec       pulumiv1.StackSpec
		runnerPods bool
		want       []string
	}{
		{name: "plainSpecNothing", spec: pulumiv1.StackSpec{Stack: "dev"}},
		{
			name: "pkoWorkspaceFieldsNeverApplied",
			spec: pulumiv1.StackSpec{WorkspaceReclaimPolicy: pulumiv1.WorkspaceReclaimDelete, UpdateTemplate: &pulumiv1.UpdateTemplate{Spec: &pulumiv1.UpdateTemplateSpec{Parallel: ptr.To[int32](2)}}},
			want: []string{"spec.workspaceReclaimPolicy", "spec.updateTemplate"},
		},
		{
			name: "updateTemplateTTLAndMetadataApplied",
			spec: pulumiv1.StackSpec{UpdateTemplate: &pulumiv1.UpdateTemplate{Spec: &pulumiv1.UpdateTemplateSpec{TTLAfterCompleted: "1h"}, Metadata: &pulumiv1.TemplateObjectMeta{Labels: map[string]string{"team": "web"}}}},
		},
		{
			name: "podFieldsUnderLocalExecutor",
			spec: pulumiv1.StackSpec{WorkspaceTemplate: &pulumiv1.WorkspaceTemplate{}, ServiceAccountName: "deployer"},
			want: []string{"spec.workspaceTemplate", "spec.serviceAccountName"},
		},
		{
			name:       "podFieldsUnderJobExecutorApplied",
			spec:       pulumiv1.StackSpec{WorkspaceTemplate: &pulumiv1.WorkspaceTemplate{}, ServiceAccountName: "deployer"},
			runnerPods: true,
		},
		{name: "outputsOfPreviewStack", spec: pulumiv1.StackSpec{Preview: true, Stackwright: outputs}, want: []string{"spec.stackwright.outputs"}},
		{name: "outputsOfDeployingStack", spec: pulumiv1.StackSpec{Stackwright: outputs}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var fields []string
			for _, msg := range notApplied(&tc.spec, tc.runnerPods) {
				fields = append(fields, firstWord(msg))
			}
			if diff := cmp.Diff(tc.want, fields, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("fields not applied (-want +got):\n%s", diff)
			}
		})
	}
}

func firstWord(s string) string {
	for i, r := range s {
		if r == ' ' {
			return s[:i]
		}
	}
	return s
}
