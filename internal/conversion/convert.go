package conversion

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Convert converts obj, an instance of a kind of group whose versions (oldest first) are
// versions, to version to: each rename of the versions between its own and to is applied
// in turn (its From moved to its To going up, back going down), and apiVersion is set. Only
// spec.parameters changes: every version shares the rest of an instance's schema.
func Convert(obj map[string]any, group string, versions []v1alpha1.TemplateVersion, to string) error {
	apiVersion, _ := obj["apiVersion"].(string)
	g, from, ok := strings.Cut(apiVersion, "/")
	if !ok || g != group {
		return fmt.Errorf("apiVersion %q is not of group %s", apiVersion, group)
	}
	i, j := index(versions, from), index(versions, to)
	if i < 0 {
		return fmt.Errorf("version %s is not a version of the kind", from)
	}
	if j < 0 {
		return fmt.Errorf("version %s is not a version of the kind", to)
	}
	if params := parametersOf(obj); params != nil {
		if err := rename(params, versions, i, j); err != nil {
			return err
		}
	}
	obj["apiVersion"] = group + "/" + to
	return nil
}

// Parameters returns a copy of params, an instance's spec.parameters in version from,
// converted to version to: what a template revision written for version to renders from.
func Parameters(params map[string]any, versions []v1alpha1.TemplateVersion, from, to string) (map[string]any, error) {
	i, j := index(versions, from), index(versions, to)
	switch {
	case from == to || params == nil:
		return params, nil
	case i < 0:
		return nil, fmt.Errorf("version %s is not a version of the kind", from)
	case j < 0:
		return nil, fmt.Errorf("version %s is not a version of the kind any more", to)
	}
	out := runtime.DeepCopyJSON(params)
	return out, rename(out, versions, i, j)
}

// rename applies the renames of the versions between versions[i] and versions[j] to
// params, in version i, so that it is in version j.
func rename(params map[string]any, versions []v1alpha1.TemplateVersion, i, j int) error {
	var err error
	for k := i + 1; k <= j && err == nil; k++ {
		for _, r := range versions[k].Renames {
			err = errors.Join(err, move(params, r.From, r.To))
		}
	}
	for k := i; k > j && err == nil; k-- {
		for _, r := range versions[k].Renames {
			err = errors.Join(err, move(params, r.To, r.From))
		}
	}
	return err
}

func index(versions []v1alpha1.TemplateVersion, name string) int {
	return slices.IndexFunc(versions, func(v v1alpha1.TemplateVersion) bool { return v.Name == name })
}

// parametersOf is obj's spec.parameters; nil when it has none to convert.
func parametersOf(obj map[string]any) map[string]any {
	spec, _ := obj["spec"].(map[string]any)
	params, _ := spec["parameters"].(map[string]any)
	return params
}

// move moves the value at path from of params to path to, making the objects above to
// that the instance does not have yet. Nothing at from is nothing to move.
func move(params map[string]any, from, to string) error {
	parent, key := lookup(params, from)
	if parent == nil {
		return nil
	}
	v, ok := parent[key]
	if !ok {
		return nil
	}
	steps := strings.Split(to, ".")
	dst := params
	for n, step := range steps[:len(steps)-1] {
		next, ok := dst[step]
		if !ok {
			next = map[string]any{}
			dst[step] = next
		}
		m, ok := next.(map[string]any)
		if !ok {
			return fmt.Errorf("failed to move parameter %s to %s: %s is not an object", from, to, strings.Join(steps[:n+1], "."))
		}
		dst = m
	}
	delete(parent, key)
	dst[steps[len(steps)-1]] = v
	return nil
}

// lookup returns the object holding path's last step, and that step; nil when an object
// on the way is missing or is not one.
func lookup(params map[string]any, path string) (map[string]any, string) {
	steps := strings.Split(path, ".")
	m := params
	for _, step := range steps[:len(steps)-1] {
		next, ok := m[step].(map[string]any)
		if !ok {
			return nil, ""
		}
		m = next
	}
	return m, steps[len(steps)-1]
}

// Check reports what keeps a kind's renames from being converted, given each version's
// schema of spec.parameters (schemas[i] is versions[i]'s): the first version has no version
// before it; each rename's From must be a property of the version before and not of its
// own, its To one of its own and not of the version before, with the same type in both;
// and no property may be renamed twice in one version.
func Check(versions []v1alpha1.TemplateVersion, schemas []apiextensionsv1.JSONSchemaProps) error {
	var errs []error
	for i, v := range versions {
		if len(v.Renames) == 0 {
			continue
		}
		if i == 0 {
			errs = append(errs, fmt.Errorf("version %s renames parameters, but no version comes before it in spec.versions", v.Name))
			continue
		}
		before, own := &schemas[i-1], &schemas[i]
		prev := versions[i-1].Name
		seen := map[string]bool{}
		for _, r := range v.Renames {
			fail := func(format string, args ...any) {
				errs = append(errs, fmt.Errorf("version %s renames %s to %s: %s", v.Name, r.From, r.To, fmt.Sprintf(format, args...)))
			}
			if seen[r.To] {
				fail("%s is the new name of another rename of this version", r.To)
			}
			seen[r.To] = true
			old, oldOK := property(before, r.From)
			cur, curOK := property(own, r.To)
			switch {
			case !oldOK:
				fail("version %s has no parameter %s", prev, r.From)
			case !curOK:
				fail("version %s has no parameter %s", v.Name, r.To)
			case old.Type != cur.Type:
				fail("its type changes from %q to %q, which no conversion can keep", old.Type, cur.Type)
			}
			if _, ok := property(own, r.From); ok && r.From != r.To {
				fail("version %s still has a parameter %s", v.Name, r.From)
			}
			if _, ok := property(before, r.To); ok && r.From != r.To {
				fail("version %s already has a parameter %s", prev, r.To)
			}
		}
	}
	return errors.Join(errs...)
}

// property is the schema of the property at path under s.
func property(s *apiextensionsv1.JSONSchemaProps, path string) (apiextensionsv1.JSONSchemaProps, bool) {
	cur := *s
	for step := range strings.SplitSeq(path, ".") {
		next, ok := cur.Properties[step]
		if !ok {
			return apiextensionsv1.JSONSchemaProps{}, false
		}
		cur = next
	}
	return cur, true
}

// Renamed is the schema of spec.parameters of versions[i], s, with the renames of the
// versions after it up to versions[j] applied: what an instance written in versions[i]
// holds once converted to versions[j]. The breaking-change guard compares it with
// versions[j]'s own schema.
func Renamed(s *apiextensionsv1.JSONSchemaProps, versions []v1alpha1.TemplateVersion, i, j int) *apiextensionsv1.JSONSchemaProps {
	if s == nil {
		return nil
	}
	out := s.DeepCopy()
	for k := i + 1; k <= j; k++ {
		for _, r := range versions[k].Renames {
			moveProperty(out, r.From, r.To)
		}
	}
	return out
}

// moveProperty moves the schema of the property at from to to (an object schema made on
// the way where needed), keeping whether it is required.
func moveProperty(s *apiextensionsv1.JSONSchemaProps, from, to string) {
	if p, required, ok := take(s, strings.Split(from, ".")); ok {
		put(s, strings.Split(to, "."), p, required)
	}
}

// take removes the property at the path steps from s and returns it. Schemas are values in
// their parents' maps: each one on the way is written back.
func take(s *apiextensionsv1.JSONSchemaProps, steps []string) (p apiextensionsv1.JSONSchemaProps, required, ok bool) {
	if len(steps) == 1 {
		p, ok = s.Properties[steps[0]]
		required = slices.Contains(s.Required, steps[0])
		delete(s.Properties, steps[0])
		s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return r == steps[0] })
		return p, required, ok
	}
	child, found := s.Properties[steps[0]]
	if !found {
		return p, false, false
	}
	p, required, ok = take(&child, steps[1:])
	s.Properties[steps[0]] = child
	return p, required, ok
}

// put sets the property at the path steps of s to p.
func put(s *apiextensionsv1.JSONSchemaProps, steps []string, p apiextensionsv1.JSONSchemaProps, required bool) {
	if s.Properties == nil {
		s.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
	}
	if len(steps) == 1 {
		s.Properties[steps[0]] = p
		if required && !slices.Contains(s.Required, steps[0]) {
			s.Required = append(s.Required, steps[0])
		}
		return
	}
	child, ok := s.Properties[steps[0]]
	if !ok {
		child = apiextensionsv1.JSONSchemaProps{Type: "object"}
	}
	put(&child, steps[1:], p, required)
	s.Properties[steps[0]] = child
}
