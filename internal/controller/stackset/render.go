package stackset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

var placeholder = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}`)

// render is the Stack spec of element e: the template's spec with every placeholder in
// its strings replaced, decoded strictly. An unknown placeholder or field is an error:
// rendering it as written would deploy something nobody asked for.
func render(t *v1alpha1.StackSetTemplate, e element) (pulumiv1.StackSpec, error) {
	var spec pulumiv1.StackSpec
	var tree any
	if err := json.Unmarshal(t.Spec.Raw, &tree); err != nil {
		return spec, fmt.Errorf("spec.template.spec is not JSON: %w", err)
	}
	var missing []string
	tree = substitute(tree, e.values, &missing)
	if len(missing) > 0 {
		slices.Sort(missing)
		missing = slices.Compact(missing)
		return spec, fmt.Errorf("spec.template.spec uses placeholders the generator does not have: %v", missing)
	}
	raw, err := json.Marshal(tree)
	if err != nil {
		return spec, fmt.Errorf("failed to encode the rendered spec: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return spec, fmt.Errorf("spec.template.spec is not a Stack's spec: %w", err)
	}
	return spec, nil
}

// substitute replaces the placeholders in every string of v (keys included).
func substitute(v any, values map[string]string, missing *[]string) any {
	switch x := v.(type) {
	case string:
		return placeholder.ReplaceAllStringFunc(x, func(m string) string {
			name := placeholder.FindStringSubmatch(m)[1]
			val, ok := values[name]
			if !ok {
				*missing = append(*missing, name)
			}
			return val
		})
	case []any:
		for i := range x {
			x[i] = substitute(x[i], values, missing)
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[substitute(k, values, missing).(string)] = substitute(val, values, missing)
		}
		return out
	}
	return v
}
