package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// podSpecPath leads from a version's openAPIV3Schema to the embedded Pod spec.
var podSpecPath = []string{"spec", "workspaceTemplate", "spec", "podTemplate", "spec"}

func main() {
	for _, path := range os.Args[1:] {
		if err := trim(path); err != nil {
			fmt.Fprintf(os.Stderr, "crdtrim: %v\n", err)
			os.Exit(1)
		}
	}
}

func trim(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("failed to read CRD: %w", err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		return fmt.Errorf("failed to decode CRD %s: %w", path, err)
	}
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		version, _ := v.(map[string]any)
		schema, _ := version["schema"].(map[string]any)
		root, _ := schema["openAPIV3Schema"].(map[string]any)
		if root == nil {
			continue
		}
		if storage, _ := version["storage"].(bool); !storage {
			stripDescriptions(root)
			continue
		}
		stripDescriptions(property(root, podSpecPath...))
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return fmt.Errorf("failed to encode CRD %s: %w", path, err)
	}
	// controller-gen's files start with a document separator; keep that shape.
	if err := os.WriteFile(path, append([]byte("---\n"), out...), 0o644); err != nil {
		return fmt.Errorf("failed to write CRD %s: %w", path, err)
	}
	return nil
}

// property follows a path of property names down a schema; nil when one is missing.
func property(schema map[string]any, names ...string) map[string]any {
	for _, n := range names {
		props, _ := schema["properties"].(map[string]any)
		schema, _ = props[n].(map[string]any)
		if schema == nil {
			return nil
		}
	}
	return schema
}

// stripDescriptions removes the description of a schema and of every schema below it. The
// keys of a properties map are field names, not keywords: a field named "description"
// stays.
func stripDescriptions(schema map[string]any) {
	if schema == nil {
		return
	}
	delete(schema, "description")
	for k, v := range schema {
		switch k {
		case "properties", "patternProperties", "definitions", "dependencies":
			if m, ok := v.(map[string]any); ok {
				for _, sub := range m {
					sm, _ := sub.(map[string]any)
					stripDescriptions(sm)
				}
			}
		case "items", "additionalProperties", "not":
			sm, _ := v.(map[string]any)
			stripDescriptions(sm)
		case "allOf", "anyOf", "oneOf":
			if l, ok := v.([]any); ok {
				for _, sub := range l {
					sm, _ := sub.(map[string]any)
					stripDescriptions(sm)
				}
			}
		}
	}
}
