package schemadiff

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// Kind is what a breaking change does to the schema. Kinds are strings so that they read
// as themselves in logs, conditions and test diffs.
type Kind string

const (
	// PropertyRemoved: a property is no longer declared, and nothing else in the new
	// schema keeps its value (no additionalProperties, no
	// x-kubernetes-preserve-unknown-fields), so the API server prunes it.
	PropertyRemoved Kind = "PropertyRemoved"
	// TypeChanged: values of the old type are no longer accepted. Widening (integer to
	// number, a type to int-or-string or to any) is not a change.
	TypeChanged Kind = "TypeChanged"
	// IntOrStringRemoved: x-kubernetes-int-or-string is gone and the node now takes only
	// one of integer and string.
	IntOrStringRemoved Kind = "IntOrStringRemoved"
	// RequiredAdded: a property that stored objects may lack is required and has no
	// default to fill it in: newly required, or required and its default removed.
	// Defaults are applied on read from etcd too, so a required property with a default
	// breaks nothing.
	RequiredAdded Kind = "RequiredAdded"
	// EnumNarrowed: a value the old enum allowed is no longer allowed, or an enum appears
	// where there was none.
	EnumNarrowed Kind = "EnumNarrowed"
	// FormatChanged: a string format was added or changed.
	FormatChanged Kind = "FormatChanged"
	// PatternChanged: a pattern was added or changed. Whether one regular expression
	// accepts all that another does is not decided: any new pattern is reported.
	PatternChanged Kind = "PatternChanged"
	// BoundsNarrowed: a numeric, length, items or properties bound was added or tightened,
	// or a multipleOf added or changed to one the old one is not a multiple of.
	BoundsNarrowed Kind = "BoundsNarrowed"
	// NullableRemoved: null was allowed and no longer is (the API server prunes nulls of
	// fields that are not nullable).
	NullableRemoved Kind = "NullableRemoved"
	// AdditionalPropertiesNarrowed: map values (or the fields no property names) that were
	// accepted are now pruned. A map whose value schema changed is compared value schema
	// to value schema instead, at the {*} path.
	AdditionalPropertiesNarrowed Kind = "AdditionalPropertiesNarrowed"
	// PreserveUnknownFieldsRemoved: x-kubernetes-preserve-unknown-fields was true and is
	// not any more, so fields the schema does not declare are pruned.
	PreserveUnknownFieldsRemoved Kind = "PreserveUnknownFieldsRemoved"
	// EmbeddedResourceChanged: x-kubernetes-embedded-resource was added (apiVersion and
	// kind become required) or removed (apiVersion, kind and metadata are pruned).
	EmbeddedResourceChanged Kind = "EmbeddedResourceChanged"
	// ListTypeChanged: x-kubernetes-list-type or x-kubernetes-list-map-keys changed, which
	// changes which lists are valid (set and map items must be unique) and how
	// server-side apply merges them.
	ListTypeChanged Kind = "ListTypeChanged"
	// ValidationRuleAdded: an x-kubernetes-validations rule that the old schema did not
	// have (a changed rule is a new one): it can reject stored objects.
	ValidationRuleAdded Kind = "ValidationRuleAdded"
	// CompositionChanged: allOf, anyOf, oneOf or not was added or changed. Their
	// containment is not decided; removing one only loosens the schema.
	CompositionChanged Kind = "CompositionChanged"
)

// Change is one breaking change.
//
// Path is where in the compared schemas the change is, relative to their root: "" is the
// root itself; a property is ".name" after its parent (no dot at the root: "size",
// "db.name"), or `["name"]` (a Go-quoted string) when the name holds anything but ASCII
// letters, digits, '_' and '-'; "[*]" is every item of an array; "{*}" is every value of a
// map (additionalProperties). So `tags[*].key`, `labels{*}`, `annotations["a.b/c"]`.
// Under places a path below the root it was compared at (e.g. "spec.parameters").
type Change struct {
	Path string
	Kind Kind
	// Detail says what changed there, as the predicate of a sentence whose subject is the
	// path: "type changed from integer to string".
	Detail string
}

// String is the change as a sentence: `spec.parameters.size: type changed from integer to
// string`. The root is named "(root)".
func (c Change) String() string {
	path := c.Path
	if path == "" {
		path = "(root)"
	}
	return path + ": " + c.Detail
}

// Under is c with its path placed below root, so that a change found comparing the schemas
// of spec.parameters reads as spec.parameters.size.
func (c Change) Under(root string) Change {
	switch {
	case root == "":
	case c.Path == "":
		c.Path = root
	case strings.HasPrefix(c.Path, "[") || strings.HasPrefix(c.Path, "{"):
		c.Path = root + c.Path
	default:
		c.Path = root + "." + c.Path
	}
	return c
}

// Breaking lists the changes from old to new that can make an object valid under old
// invalid under new, or make the API server prune part of it, sorted by path, kind and
// detail. A nil old schema held nothing, so nothing breaks; a nil new schema is an object
// that declares nothing, as the StackTemplate controller reads unset parameters, so every
// property of old is removed.
func Breaking(old, new *apiextensionsv1.JSONSchemaProps) []Change {
	if old == nil {
		return nil
	}
	if new == nil {
		new = &apiextensionsv1.JSONSchemaProps{Type: "object"}
	}
	var d differ
	d.compare("", old, new)
	slices.SortFunc(d.changes, func(a, b Change) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		return strings.Compare(a.Detail, b.Detail)
	})
	return d.changes
}

type differ struct {
	changes []Change
}

func (d *differ) add(path string, kind Kind, format string, args ...any) {
	d.changes = append(d.changes, Change{Path: path, Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// anything is the schema of a value kept as it is: an undeclared field under
// x-kubernetes-preserve-unknown-fields or additionalProperties: true, an array's items with
// no schema. Nothing breaks where new is anything, and compare stops there: it is also
// what ends the walk of two schemas that both keep unknown fields. Never modified.
var anything = &apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptr.To(true)}

func (d *differ) compare(path string, old, new *apiextensionsv1.JSONSchemaProps) {
	if new == anything {
		return
	}
	// A value of another type fails everything below it: one change says it all.
	if !d.types(path, old, new) {
		return
	}
	if old.Nullable && !new.Nullable {
		d.add(path, NullableRemoved, "null no longer allowed")
	}
	d.enum(path, old, new)
	d.format(path, old, new)
	switch {
	case new.Pattern == "" || new.Pattern == old.Pattern:
	case old.Pattern == "":
		d.add(path, PatternChanged, "pattern %#q added", new.Pattern)
	default:
		d.add(path, PatternChanged, "pattern changed from %#q to %#q", old.Pattern, new.Pattern)
	}
	d.bounds(path, old, new)
	d.lists(path, old, new)
	if ptr.Deref(old.XPreserveUnknownFields, false) && !ptr.Deref(new.XPreserveUnknownFields, false) {
		d.add(path, PreserveUnknownFieldsRemoved, "x-kubernetes-preserve-unknown-fields removed: fields the schema does not declare are no longer kept as they are")
	}
	switch {
	case old.XEmbeddedResource && !new.XEmbeddedResource:
		d.add(path, EmbeddedResourceChanged, "x-kubernetes-embedded-resource removed: apiVersion, kind and metadata are pruned unless declared")
	case !old.XEmbeddedResource && new.XEmbeddedResource:
		d.add(path, EmbeddedResourceChanged, "x-kubernetes-embedded-resource added: apiVersion and kind are required")
	}
	d.validations(path, old, new)
	d.composition(path, "allOf", old.AllOf, new.AllOf)
	d.composition(path, "anyOf", old.AnyOf, new.AnyOf)
	d.composition(path, "oneOf", old.OneOf, new.OneOf)
	d.composition(path, "not", old.Not, new.Not)
	d.required(path, old, new)
	d.fields(path, old, new)
	if old.Items != nil || new.Items != nil {
		d.compare(path+"[*]", items(old), items(new))
	}
}

// typeName names what a node's type accepts.
func typeName(s *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case s.XIntOrString:
		return "int-or-string"
	case s.Type == "":
		return "any"
	}
	return s.Type
}

// accepts reports whether every value of JSON type t is of s's type, s not being of any
// type.
func accepts(s *apiextensionsv1.JSONSchemaProps, t string) bool {
	if s.XIntOrString {
		return t == "integer" || t == "string"
	}
	return s.Type == t || (s.Type == "number" && t == "integer")
}

// types reports whether new's type accepts every value of old's, and records the change if
// it does not.
func (d *differ) types(path string, old, new *apiextensionsv1.JSONSchemaProps) bool {
	var ok bool
	switch {
	case new.Type == "" && !new.XIntOrString:
		ok = true // new takes any value
	case old.XIntOrString:
		ok = accepts(new, "integer") && accepts(new, "string")
	case old.Type == "":
		ok = false
	default:
		ok = accepts(new, old.Type)
	}
	if ok {
		return true
	}
	if old.XIntOrString && !new.XIntOrString && (new.Type == "integer" || new.Type == "string") {
		d.add(path, IntOrStringRemoved, "x-kubernetes-int-or-string removed: only %s values are allowed", new.Type)
	} else {
		d.add(path, TypeChanged, "type changed from %s to %s", typeName(old), typeName(new))
	}
	return false
}

func (d *differ) enum(path string, old, new *apiextensionsv1.JSONSchemaProps) {
	if len(new.Enum) == 0 {
		return
	}
	allowed := make(map[string]bool, len(new.Enum))
	var values []string
	for _, v := range new.Enum {
		c := canonical(v)
		allowed[c] = true
		values = append(values, c)
	}
	if len(old.Enum) == 0 {
		d.add(path, EnumNarrowed, "enum added: only %s allowed", strings.Join(values, ", "))
		return
	}
	var gone []string
	for _, v := range old.Enum {
		if c := canonical(v); !allowed[c] && !slices.Contains(gone, c) {
			gone = append(gone, c)
		}
	}
	if len(gone) > 0 {
		d.add(path, EnumNarrowed, "enum no longer allows %s", strings.Join(gone, ", "))
	}
}

// format reports a string format added or changed. The API server checks the format of
// strings only (int32, int64, float and double are never checked), and which formats it
// checks grows with its version, so every string format counts, known today or not.
func (d *differ) format(path string, old, new *apiextensionsv1.JSONSchemaProps) {
	if new.Format == "" || new.Format == old.Format {
		return
	}
	if new.Type != "" && new.Type != "string" {
		return
	}
	if old.Format == "" {
		d.add(path, FormatChanged, "format %q added", new.Format)
	} else {
		d.add(path, FormatChanged, "format changed from %q to %q", old.Format, new.Format)
	}
}

func (d *differ) bounds(path string, old, new *apiextensionsv1.JSONSchemaProps) {
	// Numbers: a bound is a value and whether it is exclusive; it tightens when its value
	// moves inward, or stays and becomes exclusive.
	if n := new.Maximum; n != nil {
		o := old.Maximum
		switch {
		case o == nil:
			d.add(path, BoundsNarrowed, "maximum added: %s", bound("<", *n, new.ExclusiveMaximum))
		case *n < *o || (*n == *o && new.ExclusiveMaximum && !old.ExclusiveMaximum):
			d.add(path, BoundsNarrowed, "maximum lowered from %s to %s", bound("<", *o, old.ExclusiveMaximum), bound("<", *n, new.ExclusiveMaximum))
		}
	}
	if n := new.Minimum; n != nil {
		o := old.Minimum
		switch {
		case o == nil:
			d.add(path, BoundsNarrowed, "minimum added: %s", bound(">", *n, new.ExclusiveMinimum))
		case *n > *o || (*n == *o && new.ExclusiveMinimum && !old.ExclusiveMinimum):
			d.add(path, BoundsNarrowed, "minimum raised from %s to %s", bound(">", *o, old.ExclusiveMinimum), bound(">", *n, new.ExclusiveMinimum))
		}
	}
	if n := new.MultipleOf; n != nil {
		switch o := old.MultipleOf; {
		case o == nil:
			d.add(path, BoundsNarrowed, "multipleOf %s added", num(*n))
		case !isMultiple(*o, *n):
			d.add(path, BoundsNarrowed, "multipleOf changed from %s to %s", num(*o), num(*n))
		}
	}
	d.max(path, "maxLength", old.MaxLength, new.MaxLength)
	d.min(path, "minLength", old.MinLength, new.MinLength)
	d.max(path, "maxItems", old.MaxItems, new.MaxItems)
	d.min(path, "minItems", old.MinItems, new.MinItems)
	d.max(path, "maxProperties", old.MaxProperties, new.MaxProperties)
	d.min(path, "minProperties", old.MinProperties, new.MinProperties)
}

// max reports a count's upper bound added or lowered.
func (d *differ) max(path, name string, old, new *int64) {
	switch {
	case new == nil:
	case old == nil:
		d.add(path, BoundsNarrowed, "%s %d added", name, *new)
	case *new < *old:
		d.add(path, BoundsNarrowed, "%s lowered from %d to %d", name, *old, *new)
	}
}

// min reports a count's lower bound added or raised; a lower bound of 0 bounds nothing.
func (d *differ) min(path, name string, old, new *int64) {
	switch o := ptr.Deref(old, 0); {
	case new == nil || *new <= o:
	case old == nil:
		d.add(path, BoundsNarrowed, "%s %d added", name, *new)
	default:
		d.add(path, BoundsNarrowed, "%s raised from %d to %d", name, o, *new)
	}
}

// bound spells a numeric bound as a comparison: "<= 10", "> 0".
func bound(op string, v float64, exclusive bool) string {
	if !exclusive {
		op += "="
	}
	return op + " " + num(v)
}

// isMultiple reports whether every multiple of o is a multiple of n.
func isMultiple(o, n float64) bool {
	r := o / n
	return r == math.Trunc(r) && !math.IsInf(r, 0)
}

func num(v float64) string {
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func (d *differ) lists(path string, old, new *apiextensionsv1.JSONSchemaProps) {
	// An unset list type is atomic.
	o, n := ptr.Deref(old.XListType, "atomic"), ptr.Deref(new.XListType, "atomic")
	if o != n {
		d.add(path, ListTypeChanged, "x-kubernetes-list-type changed from %s to %s", o, n)
		return
	}
	if n == "map" && !slices.Equal(old.XListMapKeys, new.XListMapKeys) {
		d.add(path, ListTypeChanged, "x-kubernetes-list-map-keys changed from [%s] to [%s]",
			strings.Join(old.XListMapKeys, ", "), strings.Join(new.XListMapKeys, ", "))
	}
}

// validations reports each rule new has and old had not. Rules are told apart by their
// expression: a changed message, reason or field path rejects nothing new.
func (d *differ) validations(path string, old, new *apiextensionsv1.JSONSchemaProps) {
	for _, r := range new.XValidations {
		if !slices.ContainsFunc(old.XValidations, func(o apiextensionsv1.ValidationRule) bool { return o.Rule == r.Rule }) {
			d.add(path, ValidationRuleAdded, "validation rule %#q added", r.Rule)
		}
	}
}

// composition reports a junctor (allOf, anyOf, oneOf, not) added or changed. Structural
// schemas allow only value validations in them, which a changed one may tighten; removing
// one only loosens the schema.
func (d *differ) composition(path, name string, old, new any) {
	on, nn := canonicalAny(old), canonicalAny(new)
	switch {
	case nn == "null" || nn == "[]" || on == nn:
	case on == "null" || on == "[]":
		d.add(path, CompositionChanged, "%s added", name)
	default:
		d.add(path, CompositionChanged, "%s changed", name)
	}
}

// required reports the properties that stored objects may lack and new requires without a
// default to fill them in. A property old required with a default is in every object
// written since, but not in one stored before the default came and read back with it: so
// dropping the default of a required property counts too.
func (d *differ) required(path string, old, new *apiextensionsv1.JSONSchemaProps) {
	for _, name := range new.Required {
		p, declared := new.Properties[name]
		if declared && p.Default != nil {
			continue
		}
		switch o, had := old.Properties[name]; {
		case !slices.Contains(old.Required, name):
			d.add(join(path, name), RequiredAdded, "newly required without a default")
		case had && o.Default != nil:
			d.add(join(path, name), RequiredAdded, "required, and its default was removed")
		}
	}
}

// unknown is the schema a node applies to a field none of its properties names: its
// additionalProperties schema, anything when it keeps such fields as they are, or nil when
// the API server prunes them.
func unknown(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	switch ap := s.AdditionalProperties; {
	case ap != nil && ap.Schema != nil:
		return ap.Schema
	case ap != nil && !ap.Allows:
		return nil
	case ap != nil, ptr.Deref(s.XPreserveUnknownFields, false):
		return anything
	}
	return nil
}

// isMap reports whether s takes fields it does not name by additionalProperties.
func isMap(s *apiextensionsv1.JSONSchemaProps) bool {
	ap := s.AdditionalProperties
	return ap != nil && (ap.Allows || ap.Schema != nil)
}

// fields compares each field a stored object may hold, by the schema old and new apply to
// it: its property's, else the node's schema of unknown fields. A property that moves from
// properties to a map (or back) is compared with the schema that now takes it, so that it
// counts as removed only when it is pruned, and a property added where old kept unknown
// fields is checked against the anything those objects may hold there.
func (d *differ) fields(path string, old, new *apiextensionsv1.JSONSchemaProps) {
	oldUnknown, newUnknown := unknown(old), unknown(new)
	names := make([]string, 0, len(old.Properties)+len(new.Properties))
	for name := range old.Properties {
		names = append(names, name)
	}
	for name := range new.Properties {
		if _, ok := old.Properties[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		o, n := oldUnknown, newUnknown
		if p, ok := old.Properties[name]; ok {
			o = &p
		}
		if p, ok := new.Properties[name]; ok {
			n = &p
		}
		switch {
		case o == nil:
			// No stored object can hold it: old pruned it.
		case n == nil:
			d.add(join(path, name), PropertyRemoved, "property removed")
		default:
			d.compare(join(path, name), o, n)
		}
	}
	// The fields no property names: map values, or what preserve-unknown-fields kept.
	switch {
	case oldUnknown == nil:
	case newUnknown != nil:
		d.compare(path+"{*}", oldUnknown, newUnknown)
	case isMap(old):
		d.add(path, AdditionalPropertiesNarrowed, "additionalProperties removed: fields the schema does not declare are pruned")
	default:
		// Kept by x-kubernetes-preserve-unknown-fields alone: compare reported its removal.
	}
}

// items is the schema of s's items; none keeps them as they are. (Structural schemas
// have a single items schema: the API server refuses a list of them.)
func items(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s.Items == nil || s.Items.Schema == nil {
		return anything
	}
	return s.Items.Schema
}

// join is the path of property name of the node at path.
func join(path, name string) string {
	plain := name != "" && !strings.ContainsFunc(name, func(r rune) bool { return !plainRune(r) })
	switch {
	case !plain:
		return path + "[" + strconv.Quote(name) + "]"
	case path == "":
		return name
	}
	return path + "." + name
}

// plainRune reports whether r may stand in a path's bare property name.
func plainRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}

// canonical is a JSON value in one spelling: compact, object keys sorted, so that an enum
// value compares equal however it was written.
func canonical(v apiextensionsv1.JSON) string {
	var x any
	if err := json.Unmarshal(v.Raw, &x); err != nil {
		return string(v.Raw)
	}
	return canonicalAny(x)
}

// canonicalAny is v encoded as canonical JSON. A value that does not encode (a JSON that
// holds no JSON) is spelt by fmt, which still tells it apart from others.
func canonicalAny(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	// Encoding what the encoding decodes to sorts the keys of objects within raw JSON.
	var x any
	_ = json.Unmarshal(b, &x)
	b, _ = json.Marshal(x)
	return string(b)
}
