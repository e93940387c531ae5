package provider

import (
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

const (
	// Name is the Pulumi package name of the provider. The plugin binary must be
	// called pulumi-resource-<Name>.
	Name = "stackwright-testing"
	// Version is the version the provider reports to the engine.
	Version = "0.1.0"
)

// New assembles the provider with all of its resources.
func New() (p.Provider, error) {
	return infer.NewProviderBuilder().
		WithDisplayName("Stackwright testing").
		WithDescription("Resources with real, checkable side effects for testing Stackwright.").
		WithResources(
			infer.Resource(&File{}),
			infer.Resource(&Random{}),
			infer.Resource(&Flaky{}),
			infer.Resource(&Sleep{}),
			infer.Resource(&Hog{}),
			infer.Resource(&ConfigMap{}),
			infer.Resource(&TokenReview{}),
			infer.Resource(&Environment{}),
		).
		Build()
}
