package v1_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

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
