package instance

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/scheme"
)

func TestStackName_Names_StableShortAndDistinct(t *testing.T) {
	long := strings.Repeat("x", 253)
	tests := []struct {
		name      string
		a, b      [3]string
		wantEqual bool
	}{
		{name: "sameInstanceSameName", a: [3]string{"t", "ns", "db"}, b: [3]string{"t", "ns", "db"}, wantEqual: true},
		{name: "dashesDoNotCollide", a: [3]string{"t", "a-b", "c"}, b: [3]string{"t", "a", "b-c"}},
		{name: "templatesDoNotCollide", a: [3]string{"t1", "ns", "db"}, b: [3]string{"t2", "ns", "db"}},
		{name: "longNamesDifferingAtTheEnd", a: [3]string{"t", "ns", long + "a"}, b: [3]string{"t", "ns", long + "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := stackName(tt.a[0], tt.a[1], tt.a[2]), stackName(tt.b[0], tt.b[1], tt.b[2])
			if (a == b) != tt.wantEqual {
				t.Errorf("stackName: %q and %q, want equal %v", a, b, tt.wantEqual)
			}
			if len(a) > maxStackObjectName || len(b) > maxStackObjectName {
				t.Errorf("stackName longer than %d: %q, %q", maxStackObjectName, a, b)
			}
		})
	}
	if got := pulumiStackName("p", "ns", long); len(got) > maxPulumiStackName {
		t.Errorf("pulumiStackName is %d characters long, want at most %d", len(got), maxPulumiStackName)
	}
}

func TestRender_Parameters_BecomeConfigAndSecretRefs(t *testing.T) {
	rev := v1alpha1.StackTemplateRevisionSpec{Config: []v1alpha1.TemplateConfig{
		{Key: "app:size", Parameter: "size"},
		{Key: "app:tags", Parameter: "tags"},
		{Key: "app:owner", Parameter: "meta.owner", Secret: true},
		{Key: "app:unset", Parameter: "missing"},
	}}
	base := pulumiv1.StackSpec{Stack: "p", Config: map[string]apiextensionsv1.JSON{"app:unset": {Raw: []byte(`"kept"`)}, "app:size": {Raw: []byte(`1`)}}}
	tests := []struct {
		name        string
		params      map[string]any
		wantConfig  map[string]string
		wantSecrets map[string]string
		wantErr     string
	}{
		{
			name:        "mappedValuesOverrideTheTemplatesAndUnsetOnesKeepIt",
			params:      map[string]any{"size": int64(3), "tags": []any{"a"}, "meta": map[string]any{"owner": "alice"}},
			wantConfig:  map[string]string{"app:size": "3", "app:tags": `["a"]`, "app:unset": `"kept"`},
			wantSecrets: map[string]string{"config-2": "alice"},
		},
		{
			name:    "secretParameterMustBeScalar",
			params:  map[string]any{"meta": map[string]any{"owner": map[string]any{"x": "y"}}},
			wantErr: "must be a string, number or boolean",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := render(base, rev.Config, nil, "ns", "db", "st", tt.params)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("render error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			config := map[string]string{}
			for k, v := range got.spec.Config {
				config[k] = string(v.Raw)
			}
			secrets := map[string]string{}
			for k, v := range got.secrets {
				secrets[k] = string(v)
			}
			if diff := cmp.Diff(tt.wantConfig, config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSecrets, secrets); diff != "" {
				t.Errorf("secrets (-want +got):\n%s", diff)
			}
			if ref := got.spec.SecretsRef["app:owner"]; ref.Secret == nil || ref.Secret.Name != "st-parameters" {
				t.Errorf("secretsRef app:owner = %+v, want Secret st-parameters", ref)
			}
			if got.spec.Stack != "p.ns.db" || got.spec.Stackwright.Outputs.SecretName != "st-outputs" {
				t.Errorf("stack %q, outputs %+v", got.spec.Stack, got.spec.Stackwright.Outputs)
			}
			if _, ok := base.SecretsRef["app:owner"]; ok {
				t.Error("render changed the template's spec")
			}
		})
	}
}

// An instance whose Stack an earlier version made under the 32-bit legacy name keeps it;
// every other instance's Stack has the 64-bit name, whatever else holds the legacy one.
func TestController_LocateStack_KeepsOnlyItsOwnLegacyStack(t *testing.T) {
	tmpl := &v1alpha1.StackTemplate{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: v1alpha1.StackTemplateSpec{Namespace: "platform"}}
	newName, legacy := stackName("db", "team-a", "orders"), legacyStackName("db", "team-a", "orders")
	if newName == legacy || len(newName) != len(legacy)+8 {
		t.Fatalf("stackName %q, legacyStackName %q: want 8 more hex digits", newName, legacy)
	}
	stack := func(name, uid string) client.Object {
		return &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: name, Labels: map[string]string{v1alpha1.InstanceUIDLabel: uid}}}
	}
	tests := []struct {
		name    string
		objects []client.Object
		want    string
	}{
		{name: "NoStackYet", want: newName},
		{name: "ItsLegacyStack", objects: []client.Object{stack(legacy, "uid-1")}, want: legacy},
		{name: "AnotherInstancesLegacyStack", objects: []client.Object{stack(legacy, "uid-2")}, want: newName},
		{name: "ItsStack", objects: []client.Object{stack(newName, "uid-1"), stack(legacy, "uid-1")}, want: newName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sch, err := scheme.New()
			if err != nil {
				t.Fatal(err)
			}
			c := &Controller{Client: fake.NewClientBuilder().WithScheme(sch).WithObjects(tt.objects...).Build()}
			obj := &unstructured.Unstructured{}
			obj.SetNamespace("team-a")
			obj.SetName("orders")
			obj.SetUID("uid-1")
			got, err := c.locateStack(t.Context(), tmpl, &instance{obj: obj})
			if err != nil || got != tt.want {
				t.Errorf("locateStack() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
