package bench

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// The one program every scenario runs (the sample "files" Program, minus variables): a
// Random and two Files from the stackwright-testing provider, writing below the Stack's
// own STACKWRIGHT_TESTING_ROOT. Three resources plus the stack and the provider.
const greetingMessage = "hello from the bench"

// Program shapes (BENCH_PROGRAM): the three-resource program every earlier result used,
// and the cheapest honest one, a single File and no secret, so that no run derives a
// passphrase key to read secret outputs.
const (
	ProgramFiles = "files"
	ProgramFile  = "file"
)

// ProgramShapes are the accepted BENCH_PROGRAM values.
var ProgramShapes = []string{ProgramFiles, ProgramFile}

// programFor returns the Program named name in ns of the given shape.
func programFor(ns, name, shape string) *pulumiv1.Program {
	p := benchProgram(ns, name)
	if shape == ProgramFile {
		p.Program.Resources = map[string]pulumiv1.Resource{"greeting": p.Program.Resources["greeting"]}
		p.Program.Outputs = map[string]apiextensionsv1.JSON{"greetingSha256": p.Program.Outputs["greetingSha256"]}
	}
	return p
}

// programDescription says what a shape deploys, for the results header.
func programDescription(shape string) string {
	if shape == ProgramFile {
		return "1 resource (a stackwright-testing File, no secret output)"
	}
	return "3 resources (stackwright-testing Random + 2 Files)"
}

// benchProgram returns the Program named name in ns (shape files: the rollout and
// templates scenarios edit its resources by name).
func benchProgram(ns, name string) *pulumiv1.Program {
	p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	p.Program = pulumiv1.ProgramSpec{
		Configuration: map[string]pulumiv1.Configuration{
			"message": {Type: "String", Default: jsonOf("hello")},
		},
		Resources: map[string]pulumiv1.Resource{
			"token": {
				Type:       "stackwright-testing:index:Random",
				Properties: map[string]apiextensionsv1.JSON{"length": *jsonOf(24)},
			},
			"greeting": {
				Type:       "stackwright-testing:index:File",
				Properties: map[string]apiextensionsv1.JSON{"path": *jsonOf("greeting.txt"), "content": *jsonOf("${message}")},
			},
			"tokenFile": {
				Type:       "stackwright-testing:index:File",
				Properties: map[string]apiextensionsv1.JSON{"path": *jsonOf("secrets/token.txt"), "content": *jsonOf("${token.result}")},
				Options:    &pulumiv1.ResourceOptions{DependsOn: []apiextensionsv1.JSON{*jsonOf("${greeting}")}},
			},
		},
		Outputs: map[string]apiextensionsv1.JSON{
			"greetingSha256": *jsonOf("${greeting.sha256}"),
			"tokenSha256":    *jsonOf("${tokenFile.sha256}"),
		},
	}
	return p
}

// gitProgram is benchProgram as a Pulumi.yaml in a repository; rev changes the greeting.
func gitProgram(rev string) string {
	return fmt.Sprintf(`name: gitfleet
runtime: yaml
configuration:
  message:
    type: String
    default: hello
resources:
  token:
    type: stackwright-testing:index:Random
    properties:
      length: 24
  greeting:
    type: stackwright-testing:index:File
    properties:
      path: greeting.txt
      content: ${message} %s
  tokenFile:
    type: stackwright-testing:index:File
    properties:
      path: secrets/token.txt
      content: ${token.result}
    options:
      dependsOn:
        - ${greeting}
outputs:
  greetingSha256: ${greeting.sha256}
  tokenSha256: ${tokenFile.sha256}
`, rev)
}

// benchStack returns a Stack running Program program whose files go below files.
func benchStack(ns, name, program, files string) *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: pulumiv1.StackSpec{
			Stack:             "dev",
			ProgramRef:        &pulumiv1.ProgramReference{Name: program},
			DestroyOnFinalize: true,
			Config:            map[string]apiextensionsv1.JSON{"message": *jsonOf(greetingMessage)},
			EnvRefs:           map[string]pulumiv1.ResourceRef{"STACKWRIGHT_TESTING_ROOT": literal(files)},
		},
	}
}

// gitStack returns a Stack tracking branch of repo, as stack stackName (all git Stacks
// share one project, so each needs its own stack name in the namespace's backend).
func gitStack(ns, name, stackName, repo, branch, files string, resync int64) *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: pulumiv1.StackSpec{
			Stack:                  stackName,
			GitSource:              pulumiv1.GitSource{ProjectRepo: repo, Branch: branch},
			DestroyOnFinalize:      true,
			ResyncFrequencySeconds: resync,
			Config:                 map[string]apiextensionsv1.JSON{"message": *jsonOf(greetingMessage)},
			EnvRefs:                map[string]pulumiv1.ResourceRef{"STACKWRIGHT_TESTING_ROOT": literal(files)},
		},
	}
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func literal(v string) pulumiv1.ResourceRef {
	return pulumiv1.ResourceRef{
		Type:             pulumiv1.ResourceSelectorLiteral,
		ResourceSelector: pulumiv1.ResourceSelector{Literal: &pulumiv1.LiteralRef{Value: v}},
	}
}

func jsonOf(v any) *apiextensionsv1.JSON {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with literals
	}
	return &apiextensionsv1.JSON{Raw: b}
}
