package project

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
)

var update = flag.Bool("update", false, "rewrite golden files")

func readProgram(t *testing.T, path string) *pulumiv1.Program {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := &pulumiv1.Program{}
	if err := yaml.UnmarshalStrict(b, p); err != nil {
		t.Fatalf("failed to decode %s: %v", path, err)
	}
	return p
}

// The seed's Program renders to a fixed Pulumi.yaml: a change here changes the digest of
// every Program artifact, so it must be deliberate (go test -update).
func TestRender_Render_SeedEC2Golden(t *testing.T) {
	p := readProgram(t, filepath.Join("testdata", "ec2-instance.program.yaml"))
	got, err := Render(p)
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	golden := filepath.Join("testdata", "ec2-instance.Pulumi.yaml")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("Render() differs from %s (-want +got):\n%s", golden, diff)
	}
}

func TestRender_Render_Deterministic(t *testing.T) {
	p := readProgram(t, filepath.Join("testdata", "ec2-instance.program.yaml"))
	first, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	// Map iteration order changes from run to run; the bytes must not.
	for range 50 {
		again, err := Render(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("Render() changed between calls:\n%s\n---\n%s", first, again)
		}
	}
	// Where the Program lives and how often it was edited are not part of the project.
	elsewhere := p.DeepCopy()
	elsewhere.Namespace, elsewhere.Generation, elsewhere.UID = "other", 7, "uid"
	again, err := Render(elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Errorf("Render() depends on namespace or generation")
	}
}

func raw(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

func program(spec pulumiv1.ProgramSpec) *pulumiv1.Program {
	return &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "prog", Namespace: "ns"}, Program: spec}
}

func TestRender_Render_Sections(t *testing.T) {
	tests := []struct {
		name string
		spec pulumiv1.ProgramSpec
		want string
	}{
		{
			name: "empty program has only name and runtime",
			want: "name: prog\nruntime: yaml\n",
		},
		{
			name: "configuration passes through as PKO writes it",
			spec: pulumiv1.ProgramSpec{Configuration: map[string]pulumiv1.Configuration{
				"s":          {Type: "String", Default: raw(`"hi"`)},
				"i":          {Type: "Int"},
				"n":          {Type: "Number", Default: raw(`1.5`)},
				"ls":         {Type: "List<String>", Default: raw(`["a"]`)},
				"d":          {Default: raw(`{"k":1}`)},
				"aws:region": {Type: "String", Default: raw(`"us-east-1"`)},
			}},
			want: `name: prog
runtime: yaml
configuration:
  aws:region:
    default: us-east-1
    type: String
  d:
    default:
      k: 1
  i:
    type: Int
  ls:
    default:
    - a
    type: List<String>
  "n":
    default: 1.5
    type: Number
  s:
    default: hi
    type: String
`,
		},
		{
			name: "resource options, get and expressions pass through",
			spec: pulumiv1.ProgramSpec{
				Packages:  map[string]string{"tls": "tls@5.0.0"},
				Variables: map[string]apiextensionsv1.JSON{"ami": *raw(`{"fn::invoke":{"function":"aws:ec2:getAmi","arguments":{"mostRecent":true},"return":"id"}}`)},
				Resources: map[string]pulumiv1.Resource{
					"vpc": {Type: "aws:ec2:Vpc", Get: &pulumiv1.Getter{ID: "vpc-123", State: map[string]apiextensionsv1.JSON{"cidrBlock": *raw(`"10.0.0.0/16"`)}}},
					"srv": {
						Type:       "aws:ec2:Instance",
						Properties: map[string]apiextensionsv1.JSON{"ami": *raw(`"${ami}"`), "count": *raw(`2`), "on": *raw(`"yes"`)},
						Options: &pulumiv1.ResourceOptions{
							DependsOn:         []apiextensionsv1.JSON{*raw(`"${vpc}"`)},
							Protect:           true,
							Provider:          raw(`"${prov}"`),
							CustomTimeouts:    &pulumiv1.CustomTimeouts{Create: "5m"},
							IgnoreChanges:     []string{"tags"},
							PluginDownloadURL: "https://example.com",
						},
					},
				},
				Outputs: map[string]apiextensionsv1.JSON{"ip": *raw(`"${srv.publicIp}"`)},
			},
			want: `name: prog
runtime: yaml
packages:
  tls: tls@5.0.0
variables:
  ami:
    fn::invoke:
      arguments:
        mostRecent: true
      function: aws:ec2:getAmi
      return: id
resources:
  srv:
    options:
      customTimeouts:
        create: 5m
      dependsOn:
      - ${vpc}
      ignoreChanges:
      - tags
      pluginDownloadURL: https://example.com
      protect: true
      provider: ${prov}
    properties:
      ami: ${ami}
      count: 2
      "on": "yes"
    type: aws:ec2:Instance
  vpc:
    get:
      id: vpc-123
      state:
        cidrBlock: 10.0.0.0/16
    type: aws:ec2:Vpc
outputs:
  ip: ${srv.publicIp}
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(program(tt.spec))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Render() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRender_Render_RefusesSpecsTheEngineWould(t *testing.T) {
	tests := []struct {
		name    string
		p       *pulumiv1.Program
		wantErr string
	}{
		{
			name:    "name longer than a project name may be",
			p:       &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("a", 101)}},
			wantErr: "not a valid Pulumi project name",
		},
		{
			name: "get and properties together",
			p: program(pulumiv1.ProgramSpec{Resources: map[string]pulumiv1.Resource{"r": {
				Type: "t:m:R", Get: &pulumiv1.Getter{ID: "x"}, Properties: map[string]apiextensionsv1.JSON{"a": *raw(`1`)},
			}}}),
			wantErr: `resource "r" sets both get and properties`,
		},
		{
			name:    "configuration without type or default",
			p:       program(pulumiv1.ProgramSpec{Configuration: map[string]pulumiv1.Configuration{"c": {}}}),
			wantErr: `configuration "c" needs a type, a default, or both`,
		},
		{
			name: "variable and resource with one name",
			p: program(pulumiv1.ProgramSpec{
				Variables: map[string]apiextensionsv1.JSON{"x": *raw(`1`)},
				Resources: map[string]pulumiv1.Resource{"x": {Type: "t:m:R"}},
			}),
			wantErr: `resource "x" has the same name as variable "x"`,
		},
		{
			name:    "reserved name",
			p:       program(pulumiv1.ProgramSpec{Variables: map[string]apiextensionsv1.JSON{"pulumi": *raw(`1`)}}),
			wantErr: `variable "pulumi" uses the reserved name pulumi`,
		},
		{
			name:    "number beyond a 64-bit float",
			p:       program(pulumiv1.ProgramSpec{Variables: map[string]apiextensionsv1.JSON{"big": *raw(`{"n":[1e700]}`)}}),
			wantErr: "spec.variables.big.n[0]: number 1e700 is out of range",
		},
		{
			name:    "undecodable value",
			p:       program(pulumiv1.ProgramSpec{Outputs: map[string]apiextensionsv1.JSON{"o": {Raw: []byte(`{not json`)}}}),
			wantErr: "failed to render Program outputs",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render(tt.p)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Render() = %v; want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestPack_Pack_IsTheRenderedProject(t *testing.T) {
	p := readProgram(t, filepath.Join("testdata", "ec2-instance.program.yaml"))
	files, err := Pack(p)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Render(p)
	if diff := cmp.Diff(map[string][]byte{"Pulumi.yaml": want}, files); diff != "" {
		t.Errorf("Pack() (-want +got):\n%s", diff)
	}
	if _, err := artifact.Pack(files); err != nil {
		t.Errorf("artifact.Pack(Pack()) = %v", err)
	}
}

func TestRevision_Revision_IsTheGeneration(t *testing.T) {
	p := program(pulumiv1.ProgramSpec{})
	p.Generation = 3
	if got := Revision(p); got != "generation/3" {
		t.Errorf("Revision() = %q; want generation/3", got)
	}
}
