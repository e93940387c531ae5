package stacktemplate

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

func member(name, prefix string, dependsOn ...string) v1alpha1.TemplateStack {
	return v1alpha1.TemplateStack{Name: name, Stack: apiextensionsv1.JSON{Raw: fmt.Appendf(nil, `{"stack":%q,"programRef":{"name":"p"}}`, prefix)}, DependsOn: dependsOn}
}

func reads(s v1alpha1.TemplateStack, stack, output string) v1alpha1.TemplateStack {
	s.Config = append(s.Config, v1alpha1.TemplateConfig{Key: output, StackOutput: &v1alpha1.TemplateStackOutput{Stack: stack, Output: output}})
	return s
}

func TestStackOrder_Order_ProducersFirst(t *testing.T) {
	tests := []struct {
		name    string
		stacks  []v1alpha1.TemplateStack
		want    []string
		wantErr string
	}{
		{name: "none"},
		{name: "listedOrderWithoutDependencies", stacks: []v1alpha1.TemplateStack{member("b", "b"), member("a", "a")}, want: []string{"b", "a"}},
		{
			name:   "dependsOnAndOutputsRead",
			stacks: []v1alpha1.TemplateStack{reads(member("app", "app"), "db", "host"), member("db", "db", "network"), member("network", "net")},
			want:   []string{"network", "db", "app"},
		},
		{
			name:    "cycle",
			stacks:  []v1alpha1.TemplateStack{member("a", "a", "b"), reads(member("b", "b"), "c", "x"), member("c", "c", "a")},
			wantErr: "spec.stacks form a dependency cycle: a → b → c → a; none of them could ever be created",
		},
		{
			name:    "unknownAndSelf",
			stacks:  []v1alpha1.TemplateStack{member("a", "a", "a"), reads(member("b", "b"), "nope", "x")},
			wantErr: "spec.stacks[a] depends on a, which is not another entry of spec.stacks\nspec.stacks[b] depends on nope, which is not another entry of spec.stacks",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			order, err := StackOrder(tt.stacks)
			var got []string
			for _, s := range order {
				got = append(got, s.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("StackOrder() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantErr, errString(err)); diff != "" {
				t.Errorf("StackOrder() error (-want +got):\n%s", diff)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestCheckComposition_Template_RefusesWhatCannotBeMade(t *testing.T) {
	networkPolicy := `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"labels":{"app":"${parameters.app}"}},"spec":{"podSelector":{},"ingress":[{"from":[{"ipBlock":{"cidr":"${outputs.cidr}"}}]}]}}`
	tests := []struct {
		name    string
		mutate  func(*v1alpha1.StackTemplate)
		wantErr string
	}{
		{name: "composed", mutate: func(*v1alpha1.StackTemplate) {}},
		{
			name: "memberNotAStackSpec",
			mutate: func(t *v1alpha1.StackTemplate) {
				t.Spec.Stacks[0].Stack.Raw = []byte(`{"stack":"net","programmRef":{}}`)
			},
			wantErr: `spec.stacks[network].stack is not a Stack's spec: json: unknown field "programmRef"`,
		},
		{
			name: "samePrefix",
			mutate: func(t *v1alpha1.StackTemplate) {
				t.Spec.Stacks[0].Stack.Raw = []byte(`{"stack":"app","programRef":{"name":"net"}}`)
			},
			wantErr: `spec.stack and spec.stacks[network].stack have the same stack "app": every instance's stacks would be one`,
		},
		{
			name: "configReadsAnUnknownStack",
			mutate: func(t *v1alpha1.StackTemplate) {
				t.Spec.Config[0].StackOutput.Stack = "db"
			},
			wantErr: "spec.config[cidr] reads an output of db, which is not an entry of spec.stacks",
		},
		{
			name:    "outputTwice",
			mutate:  func(t *v1alpha1.StackTemplate) { t.Spec.Outputs = append(t.Spec.Outputs, "cidr") },
			wantErr: "output cidr is listed twice among spec.outputs and spec.stacks[].outputs: an instance receives each output once",
		},
		{
			name: "objectReadsAnUnpublishedOutput",
			mutate: func(t *v1alpha1.StackTemplate) {
				t.Spec.Stacks[0].Outputs = nil
			},
			wantErr: "spec.objects[policy] reads output cidr, which the template does not publish (spec.outputs, spec.stacks[].outputs)",
		},
		{
			name: "objectNamesItself",
			mutate: func(t *v1alpha1.StackTemplate) {
				t.Spec.Objects[0].Object.Raw = []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"kube-system"}}`)
			},
			wantErr: "spec.objects[policy].object: metadata.namespace cannot be set: an object's metadata may set labels and annotations only (its name is <instance>-policy, in the instance's namespace)",
		},
		{
			name:    "objectWithoutKind",
			mutate:  func(t *v1alpha1.StackTemplate) { t.Spec.Objects[0].Object.Raw = []byte(`{"apiVersion":"v1"}`) },
			wantErr: "spec.objects[policy].object needs an apiVersion and a kind",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := fieldsTemplate()
			tmpl.Spec.Stack.Raw = []byte(`{"stack":"app","programRef":{"name":"app"}}`)
			tmpl.Spec.Config = []v1alpha1.TemplateConfig{{Key: "cidr", StackOutput: &v1alpha1.TemplateStackOutput{Stack: "network", Output: "cidr"}}}
			tmpl.Spec.Outputs = []string{"url"}
			net := member("network", "net")
			net.Outputs = []string{"cidr"}
			tmpl.Spec.Stacks = []v1alpha1.TemplateStack{net}
			tmpl.Spec.Objects = []v1alpha1.TemplateObject{{Name: "policy", Object: apiextensionsv1.JSON{Raw: []byte(networkPolicy)}}}
			tt.mutate(tmpl)
			if diff := cmp.Diff(tt.wantErr, errString(checkComposition(tmpl))); diff != "" {
				t.Errorf("checkComposition() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckObjectKinds_Template_OnlyTheAllowedKinds(t *testing.T) {
	tmpl := fieldsTemplate()
	tmpl.Spec.Objects = []v1alpha1.TemplateObject{
		{Name: "config", Object: apiextensionsv1.JSON{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`)}},
		{Name: "binding", Object: apiextensionsv1.JSON{Raw: []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding"}`)}},
	}
	allowed := []schema.GroupKind{{Kind: "ConfigMap"}, {Group: "networking.k8s.io", Kind: "NetworkPolicy"}}
	if diff := cmp.Diff("spec.objects[binding] is a RoleBinding.rbac.authorization.k8s.io", errString(checkObjectKinds(tmpl, allowed))); diff != "" {
		t.Errorf("checkObjectKinds() (-want +got):\n%s", diff)
	}
	if err := checkObjectKinds(tmpl, append(allowed, schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"})); err != nil {
		t.Errorf("checkObjectKinds() with RoleBinding allowed = %v", err)
	}
}
