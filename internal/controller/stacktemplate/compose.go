package stacktemplate

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Dependencies are the entries of spec.stacks a Stack of the template waits for: those its
// dependsOn names and those whose outputs its config reads, sorted, each once.
func Dependencies(dependsOn []string, config []v1alpha1.TemplateConfig) []string {
	deps := slices.Clone(dependsOn)
	for _, c := range config {
		if c.StackOutput != nil {
			deps = append(deps, c.StackOutput.Stack)
		}
	}
	slices.Sort(deps)
	return slices.Compact(deps)
}

// StackOrder orders spec.stacks so that each entry comes after those it depends on, in
// the order listed where the dependencies leave a choice. It refuses a dependency on an
// entry that does not exist, on itself, and a cycle, naming it.
func StackOrder(stacks []v1alpha1.TemplateStack) ([]v1alpha1.TemplateStack, error) {
	byName := map[string]int{}
	for i, s := range stacks {
		byName[s.Name] = i
	}
	var errs []error
	for _, s := range stacks {
		for _, d := range Dependencies(s.DependsOn, s.Config) {
			if _, ok := byName[d]; !ok || d == s.Name {
				errs = append(errs, fmt.Errorf("spec.stacks[%s] depends on %s, which is not another entry of spec.stacks", s.Name, d))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	const (
		unvisited = iota
		visiting
		done
	)
	state := make([]int, len(stacks))
	order := make([]v1alpha1.TemplateStack, 0, len(stacks))
	var path []string
	var visit func(i int) error
	visit = func(i int) error {
		s := stacks[i]
		switch state[i] {
		case done:
			return nil
		case visiting:
			cycle := append(path[slices.Index(path, s.Name):], s.Name)
			return fmt.Errorf("spec.stacks form a dependency cycle: %s; none of them could ever be created", strings.Join(cycle, " → "))
		}
		state[i] = visiting
		path = append(path, s.Name)
		for _, d := range Dependencies(s.DependsOn, s.Config) {
			if err := visit(byName[d]); err != nil {
				return err
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		order = append(order, s)
		return nil
	}
	for i := range stacks {
		if err := visit(i); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// checkComposition refuses what would keep the template's Stacks and objects from being
// made as written: a Stack spec of spec.stacks the Stack kind does not read, two Stacks
// of the template with the same stack prefix (their instances' stacks would be one), a
// config reading an output of a Stack that is not an entry of spec.stacks, dependencies
// that cannot be ordered, an output published twice, and an object that is not a
// manifest or reads an output the template does not publish.
func checkComposition(t *v1alpha1.StackTemplate) error {
	var errs []error
	prefixes := map[string]string{}
	if spec, err := StackSpec(t); err == nil {
		prefixes[spec.Stack] = "spec.stack"
	}
	for _, s := range t.Spec.Stacks {
		field := "spec.stacks[" + s.Name + "].stack"
		spec, err := DecodeStack(s.Stack, field)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, ok := prefixes[spec.Stack]; ok {
			errs = append(errs, fmt.Errorf("%s and %s have the same stack %q: every instance's stacks would be one", other, field, spec.Stack))
		}
		prefixes[spec.Stack] = field
	}
	for _, c := range t.Spec.Config {
		if o := c.StackOutput; o != nil && !slices.ContainsFunc(t.Spec.Stacks, func(s v1alpha1.TemplateStack) bool { return s.Name == o.Stack }) {
			errs = append(errs, fmt.Errorf("spec.config[%s] reads an output of %s, which is not an entry of spec.stacks", c.Key, o.Stack))
		}
	}
	if _, err := StackOrder(t.Spec.Stacks); err != nil {
		errs = append(errs, err)
	}
	published := map[string]bool{}
	for _, o := range t.PublishedOutputs() {
		if published[o] {
			errs = append(errs, fmt.Errorf("output %s is listed twice among spec.outputs and spec.stacks[].outputs: an instance receives each output once", o))
		}
		published[o] = true
	}
	for _, o := range t.Spec.Objects {
		obj, err := DecodeObject(o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, p := range Placeholders(obj.Object) {
			if p.Source == SourceOutputs && !published[p.Path] {
				errs = append(errs, fmt.Errorf("spec.objects[%s] reads output %s, which the template does not publish (spec.outputs, spec.stacks[].outputs)", o.Name, p.Path))
			}
		}
	}
	return errors.Join(errs...)
}

// checkObjectKinds refuses objects of kinds the install does not allow.
func checkObjectKinds(t *v1alpha1.StackTemplate, allowed []schema.GroupKind) error {
	var errs []error
	for _, o := range t.Spec.Objects {
		obj, err := DecodeObject(o)
		if err != nil {
			continue // checkComposition says why
		}
		if gk := obj.GroupVersionKind().GroupKind(); !slices.Contains(allowed, gk) {
			errs = append(errs, fmt.Errorf("spec.objects[%s] is a %s", o.Name, gk))
		}
	}
	return errors.Join(errs...)
}

// Sources of a placeholder's value.
const (
	SourceParameters = "parameters"
	SourceOutputs    = "outputs"
)

// placeholderPattern is ${parameters.<path>} or ${outputs.<name>}; any other text, ${
// included, is the object's own.
var placeholderPattern = regexp.MustCompile(`\$\{(parameters|outputs)\.([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)\}`)

// Placeholder is one ${<source>.<path>} in an object's string value.
type Placeholder struct {
	Source, Path string
	// Start and End are its bounds in the string.
	Start, End int
}

// FindPlaceholders lists the placeholders of s, in order.
func FindPlaceholders(s string) []Placeholder {
	var out []Placeholder
	for _, m := range placeholderPattern.FindAllStringSubmatchIndex(s, -1) {
		out = append(out, Placeholder{Source: s[m[2]:m[3]], Path: s[m[4]:m[5]], Start: m[0], End: m[1]})
	}
	return out
}

// Placeholders lists the placeholders of every string value of a manifest but its
// apiVersion and kind, which are never substituted.
func Placeholders(obj map[string]any) []Placeholder {
	var out []Placeholder
	_, _ = WalkStrings(obj, func(s string) (any, error) {
		out = append(out, FindPlaceholders(s)...)
		return s, nil
	})
	return out
}

// WalkStrings returns a copy of the manifest obj with each string value (not its map keys,
// nor its apiVersion and kind) replaced by what f returns for it.
func WalkStrings(obj map[string]any, f func(string) (any, error)) (map[string]any, error) {
	var walk func(v any) (any, error)
	walk = func(v any) (any, error) {
		switch x := v.(type) {
		case string:
			return f(x)
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				w, err := walk(e)
				if err != nil {
					return nil, err
				}
				out[k] = w
			}
			return out, nil
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				w, err := walk(e)
				if err != nil {
					return nil, err
				}
				out[i] = w
			}
			return out, nil
		}
		return v, nil
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k == "apiVersion" || k == "kind" {
			out[k] = v
			continue
		}
		w, err := walk(v)
		if err != nil {
			return nil, err
		}
		out[k] = w
	}
	return out, nil
}

// allowedMetadata are the metadata fields a template's object may set: its name and
// namespace are the instance's to decide, and owners, finalizers and the rest are
// Stackwright's or the API server's.
var allowedMetadata = []string{"labels", "annotations"}

// DecodeObject decodes an entry of spec.objects: a manifest with apiVersion and kind,
// whose metadata sets labels and annotations only.
func DecodeObject(o v1alpha1.TemplateObject) (*unstructured.Unstructured, error) {
	field := "spec.objects[" + o.Name + "].object"
	m := map[string]any{}
	if err := utiljson.Unmarshal(o.Object.Raw, &m); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object: %w", field, err)
	}
	obj := &unstructured.Unstructured{Object: m}
	if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
		return nil, fmt.Errorf("%s needs an apiVersion and a kind", field)
	}
	if _, err := schema.ParseGroupVersion(obj.GetAPIVersion()); err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if meta, ok := m["metadata"]; ok {
		mm, ok := meta.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: metadata is not an object", field)
		}
		for k := range mm {
			if !slices.Contains(allowedMetadata, k) {
				return nil, fmt.Errorf("%s: metadata.%s cannot be set: an object's metadata may set labels and annotations only (its name is <instance>-%s, in the instance's namespace)", field, k, o.Name)
			}
		}
	}
	return obj, nil
}
