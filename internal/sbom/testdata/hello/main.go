// Command hello is a binary with known modules for the sbom tests: it links cyclonedx-go.
package main

import (
	"fmt"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

func main() { fmt.Println(cdx.ComponentTypeApplication) }
