package instance

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// A key read from another Stack's output refers to where that Stack publishes it (the
// ConfigMap, or for a secret key the Secret), never copies its value, and the producers
// become the consumer's prerequisites, after those of the template's own spec.
func TestRender_StackOutputs_ReadTheProducersExports(t *testing.T) {
	base := pulumiv1.StackSpec{
		Stack: "app", Prerequisites: []pulumiv1.PrerequisiteRef{{Name: "shared"}},
		Config: map[string]apiextensionsv1.JSON{"app:host": {Raw: []byte(`"localhost"`)}},
	}
	config := []v1alpha1.TemplateConfig{
		{Key: "app:host", StackOutput: &v1alpha1.TemplateStackOutput{Stack: "db", Output: "host"}},
		{Key: "app:password", StackOutput: &v1alpha1.TemplateStackOutput{Stack: "db", Output: "password"}, Secret: true},
	}
	got, err := render(base, config, map[string]string{"db": "db-stack", "net": "net-stack"}, "ns", "web", "app-stack", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := base.DeepCopy()
	want.Stack = "app.ns.web"
	want.Config = map[string]apiextensionsv1.JSON{}
	want.ConfigRef = map[string]pulumiv1.ConfigMapRef{"app:host": {Name: "db-stack-outputs", Key: "host"}}
	want.SecretsRef = map[string]pulumiv1.ResourceRef{"app:password": {Type: pulumiv1.ResourceSelectorSecret, ResourceSelector: pulumiv1.ResourceSelector{
		Secret: &pulumiv1.SecretSelector{Name: "db-stack-outputs", Key: "password"},
	}}}
	want.Prerequisites = []pulumiv1.PrerequisiteRef{{Name: "shared"}, {Name: "db-stack"}, {Name: "net-stack"}}
	want.Stackwright = &pulumiv1.StackwrightSpec{Outputs: &pulumiv1.OutputsExport{SecretName: "app-stack-outputs", ConfigMapName: "app-stack-outputs"}}
	if diff := cmp.Diff(*want, got.spec); diff != "" {
		t.Errorf("render() spec (-want +got):\n%s", diff)
	}
	if len(got.secrets) != 0 {
		t.Errorf("render() secrets = %v, want none: outputs are read where they are published", got.secrets)
	}
}

func TestMemberStackName_Names_DistinctFromTheInstancesOwn(t *testing.T) {
	names := map[string]bool{
		stackName("t", "ns", "db"): true, memberStackName("t", "net", "ns", "db"): true, memberStackName("t", "db", "ns", "net"): true,
		memberStackName("t", "net", "ns", "db2"): true,
	}
	if len(names) != 4 {
		t.Errorf("names collide: %v", names)
	}
	for n := range names {
		if len(n) > maxStackObjectName {
			t.Errorf("%q is longer than %d", n, maxStackObjectName)
		}
	}
}

// Placeholders are substituted in string values only, keeping a whole-string value's
// type; a parameter that is an object, or one written to look like structure, stays out
// of the object's shape.
func TestRenderObject_Placeholders_ScalarsOnly(t *testing.T) {
	const policy = `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"labels":{"team":"${parameters.team}"}},
		"spec":{"podSelector":{"matchLabels":{"app":"${parameters.app}"}},"ingress":[{"from":[{"ipBlock":{"cidr":"${outputs.cidr}"}}],"ports":[{"port":"${outputs.port}"}]}],
		"note":"from ${outputs.cidr} for ${parameters.team} ${unknown.x} $${parameters.team}"}}`
	outputs := &published{
		values: map[string]apiextensionsv1.JSON{"cidr": {Raw: []byte(`"10.0.0.0/16"`)}, "port": {Raw: []byte(`5432`)}, "token": {Raw: []byte(`"[secret]"`)}, "tags": {Raw: []byte(`["a"]`)}},
		public: map[string]string{"cidr": "10.0.0.0/16", "port": "5432", "tags": `["a"]`},
		all:    map[string][]byte{"cidr": nil, "port": nil, "token": nil, "tags": nil},
	}
	tests := []struct {
		name       string
		object     string
		params     map[string]any
		outputs    *published
		wantSpec   map[string]any
		wantAwaits []string
		wantErr    string
	}{
		{
			name:    "substituted",
			object:  policy,
			params:  map[string]any{"team": "a", "app": `web","x":"y`},
			outputs: outputs,
			wantSpec: map[string]any{
				"podSelector": map[string]any{"matchLabels": map[string]any{"app": `web","x":"y`}},
				"ingress":     []any{map[string]any{"from": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/16"}}}, "ports": []any{map[string]any{"port": int64(5432)}}}},
				"note":        "from 10.0.0.0/16 for a ${unknown.x} $a",
			},
		},
		{name: "outputsNotPublishedYet", object: policy, params: map[string]any{"team": "a", "app": "web"}, wantAwaits: []string{"cidr", "port"}},
		{
			name:    "secretOutputNeverFillsAnObject",
			object:  `{"apiVersion":"v1","kind":"ConfigMap","data":{"t":"${outputs.token}"}}`,
			outputs: outputs, wantAwaits: []string{"token"},
		},
		{name: "objectParameter", object: policy, params: map[string]any{"team": map[string]any{"x": "y"}, "app": "web"}, outputs: outputs, wantErr: "parameter team must be a string, number or boolean"},
		{name: "unsetParameter", object: policy, params: map[string]any{"team": "a"}, outputs: outputs, wantErr: "parameter app is unset"},
		{name: "structuredOutput", object: `{"apiVersion":"v1","kind":"ConfigMap","data":{"t":"${outputs.tags}"}}`, outputs: outputs, wantErr: "output tags must be a string, number or boolean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, awaits, err := renderObject(v1alpha1.TemplateObject{Name: "policy", Object: apiextensionsv1.JSON{Raw: []byte(tt.object)}}, tt.params, tt.outputs)
			if tt.wantErr != "" || err != nil {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("renderObject() error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if diff := cmp.Diff(tt.wantAwaits, awaits); diff != "" {
				t.Errorf("renderObject() awaits (-want +got):\n%s", diff)
			}
			if tt.wantSpec == nil {
				return
			}
			if diff := cmp.Diff(tt.wantSpec, obj.Object["spec"]); diff != "" {
				t.Errorf("renderObject() spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]string{"team": "a"}, obj.GetLabels()); diff != "" {
				t.Errorf("renderObject() labels (-want +got):\n%s", diff)
			}
		})
	}
}
