package provider

import (
	"context"
	"os"
	"sort"
	"strings"

	"github.com/pulumi/pulumi-go-provider/infer"
)

// Environment records the names (never the values) of the environment variables the
// provider process sees when it is created: plugins inherit the engine's environment, so
// tests prove what reaches a program, and what does not, without printing a secret.
type Environment struct{}

// EnvironmentArgs are the inputs of an Environment.
type EnvironmentArgs struct {
	// Prefix limits the names recorded; empty records them all.
	Prefix string `pulumi:"prefix,optional" provider:"replaceOnChanges"`
}

// EnvironmentState is the checkpointed state of an Environment.
type EnvironmentState struct {
	Prefix string   `pulumi:"prefix"`
	Names  []string `pulumi:"names"`
}

// Annotate describes the resource.
func (e *Environment) Annotate(a infer.Annotator) {
	a.SetToken("index", "Environment")
	a.Describe(&e, "The sorted names of the environment variables the provider process had when the resource was created; values are never recorded.")
}

// Annotate describes the inputs.
func (a *EnvironmentArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Prefix, "Record only names with this prefix.")
}

// Annotate describes the outputs.
func (s *EnvironmentState) Annotate(a infer.Annotator) {
	a.Describe(&s.Names, "Sorted names of the variables.")
}

// Create records the names.
func (*Environment) Create(_ context.Context, req infer.CreateRequest[EnvironmentArgs]) (infer.CreateResponse[EnvironmentState], error) {
	return infer.CreateResponse[EnvironmentState]{
		ID:     "environment",
		Output: EnvironmentState{Prefix: req.Inputs.Prefix, Names: environmentNames(os.Environ(), req.Inputs.Prefix)},
	}, nil
}

func environmentNames(environ []string, prefix string) []string {
	names := []string{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}
