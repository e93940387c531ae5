// Command pulumi-resource-kubernetes is the Pulumi Kubernetes provider, built from its
// published Go module. Upstream's own main package embeds two files that its release
// build generates and the module does not ship (schema-embed.json and
// terraform-mapping-embed.json), so it cannot be built from the module proxy as it is:
// this package is the same few lines around the provider, and ../../gen writes the two
// files from the module's schema.json and terraform-mapping.json.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var schema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, schema, terraformMapping)
}
