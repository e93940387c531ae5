// Command gen writes the two files the provider's main package embeds, as upstream's
// generate.go does: the package schema with its version set, and the Terraform mapping,
// both compacted.
//
// Usage: go run ./gen <provider module dir> <version> <output dir>
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: gen <provider module dir> <version> <output dir>")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(module, version, out string) error {
	src := filepath.Join(module, "cmd", "pulumi-resource-kubernetes")
	raw, err := os.ReadFile(filepath.Join(src, "schema.json"))
	if err != nil {
		return fmt.Errorf("failed to read schema: %w", err)
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("failed to decode schema: %w", err)
	}
	v, err := json.Marshal(version)
	if err != nil {
		return fmt.Errorf("failed to encode version: %w", err)
	}
	spec["version"] = v
	schema, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("failed to encode schema: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "schema-embed.json"), schema, 0o644); err != nil {
		return fmt.Errorf("failed to write schema: %w", err)
	}
	raw, err = os.ReadFile(filepath.Join(src, "terraform-mapping.json"))
	if err != nil {
		return fmt.Errorf("failed to read terraform mapping: %w", err)
	}
	var mapping bytes.Buffer
	if err := json.Compact(&mapping, raw); err != nil {
		return fmt.Errorf("failed to compact terraform mapping: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "terraform-mapping-embed.json"), mapping.Bytes(), 0o644); err != nil {
		return fmt.Errorf("failed to write terraform mapping: %w", err)
	}
	return nil
}
