package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A field called "description" is a field, not a keyword: only schema descriptions go.
func TestStripDescriptions_Schema_KeepsFieldsNamedDescription(t *testing.T) {
	schema := map[string]any{
		"description": "a pod",
		"type":        "object",
		"properties": map[string]any{
			"description": map[string]any{"type": "string", "description": "the field"},
			"list":        map[string]any{"type": "array", "items": map[string]any{"type": "object", "description": "an item"}},
			"labels":      map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string", "description": "a label"}},
		},
	}
	stripDescriptions(schema)
	want := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"description": map[string]any{"type": "string"},
			"list":        map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
			"labels":      map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
		},
	}
	if diff := cmp.Diff(want, schema); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestProperty_Path_FollowsPropertiesAndStopsAtMissing(t *testing.T) {
	leaf := map[string]any{"type": "string"}
	schema := map[string]any{"properties": map[string]any{"spec": map[string]any{"properties": map[string]any{"x": leaf}}}}
	if got := property(schema, "spec", "x"); got == nil || got["type"] != "string" {
		t.Errorf("property(spec, x) = %v; want the leaf", got)
	}
	if got := property(schema, "spec", "missing", "x"); got != nil {
		t.Errorf("property(spec, missing, x) = %v; want nil", got)
	}
}
