package schemadiff

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// schema decodes a schema written in YAML, strictly, so that a misspelt field fails the
// test instead of comparing nothing; "" is no schema.
func schema(t *testing.T, y string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	if y == "" {
		return nil
	}
	var s apiextensionsv1.JSONSchemaProps
	if err := yaml.UnmarshalStrict([]byte(y), &s); err != nil {
		t.Fatalf("failed to decode schema %q: %v", y, err)
	}
	return &s
}

// params is an object schema with the given properties, written in YAML flow style.
func params(properties string) string {
	return "{type: object, properties: " + properties + "}"
}

func TestBreaking_Changes(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     []Change
	}{
		// Properties.
		{
			name: "propertyRemoved",
			old:  params("{size: {type: integer}, tier: {type: string}}"),
			new:  params("{tier: {type: string}}"),
			want: []Change{{Path: "size", Kind: PropertyRemoved, Detail: "property removed"}},
		},
		{
			name: "nestedPropertyRemoved",
			old:  params("{db: {type: object, properties: {name: {type: string}, port: {type: integer}}}}"),
			new:  params("{db: {type: object, properties: {port: {type: integer}}}}"),
			want: []Change{{Path: "db.name", Kind: PropertyRemoved, Detail: "property removed"}},
		},
		{
			name: "propertyRemovedFromArrayOfObjects",
			old:  params("{tags: {type: array, items: {type: object, properties: {key: {type: string}, value: {type: string}}}}}"),
			new:  params("{tags: {type: array, items: {type: object, properties: {value: {type: string}}}}}"),
			want: []Change{{Path: "tags[*].key", Kind: PropertyRemoved, Detail: "property removed"}},
		},
		{
			name: "propertyRemovedFromMapValues",
			old:  params("{zones: {type: object, additionalProperties: {type: object, properties: {cidr: {type: string}, size: {type: integer}}}}}"),
			new:  params("{zones: {type: object, additionalProperties: {type: object, properties: {size: {type: integer}}}}}"),
			want: []Change{{Path: "zones{*}.cidr", Kind: PropertyRemoved, Detail: "property removed"}},
		},
		{
			name: "propertyRemovedWithQuotedName",
			old:  params(`{db: {type: object, properties: {"a.b/c": {type: string}}}, "": {type: string}}`),
			new:  params("{db: {type: object}}"),
			want: []Change{
				{Path: `[""]`, Kind: PropertyRemoved, Detail: "property removed"},
				{Path: `db["a.b/c"]`, Kind: PropertyRemoved, Detail: "property removed"},
			},
		},
		{
			name: "propertyRemovedButKeptByPreserveUnknownFields",
			old:  params("{size: {type: integer}, tier: {type: string}}"),
			new:  "{type: object, x-kubernetes-preserve-unknown-fields: true, properties: {tier: {type: string}}}",
		},
		{
			name: "propertyMovedIntoMapOfItsType",
			old:  params("{labels: {type: object, properties: {team: {type: string}}}}"),
			new:  params("{labels: {type: object, additionalProperties: {type: string}}}"),
		},
		{
			name: "propertyMovedIntoMapOfAnotherType",
			old:  params("{labels: {type: object, properties: {team: {type: string}}}}"),
			new:  params("{labels: {type: object, additionalProperties: {type: integer}}}"),
			want: []Change{{Path: "labels.team", Kind: TypeChanged, Detail: "type changed from string to integer"}},
		},
		{
			name: "optionalPropertyAdded",
			old:  params("{tier: {type: string}}"),
			new:  params("{tier: {type: string}, size: {type: integer, minimum: 1, pattern: x, enum: [1, 2]}}"),
		},
		{
			name: "propertyAddedWhereUnknownFieldsWereKept",
			old:  "{type: object, x-kubernetes-preserve-unknown-fields: true}",
			new:  "{type: object, x-kubernetes-preserve-unknown-fields: true, properties: {size: {type: integer}, any: {x-kubernetes-preserve-unknown-fields: true}}}",
			want: []Change{{Path: "size", Kind: TypeChanged, Detail: "type changed from any to integer"}},
		},
		{
			name: "propertyAddedWithinMapValues",
			old:  params("{labels: {type: object, additionalProperties: {type: string}}}"),
			new:  params("{labels: {type: object, properties: {team: {type: string, maxLength: 63}}, x-kubernetes-preserve-unknown-fields: true}}"),
			want: []Change{{Path: "labels.team", Kind: BoundsNarrowed, Detail: "maxLength 63 added"}},
		},

		// Types.
		{
			name: "typeChanged",
			old:  params("{size: {type: integer}}"),
			new:  params("{size: {type: string}}"),
			want: []Change{{Path: "size", Kind: TypeChanged, Detail: "type changed from integer to string"}},
		},
		{
			name: "typeChangedIsReportedOnceForTheSubtree",
			old:  params("{db: {type: object, required: [name], properties: {name: {type: string}}}}"),
			new:  params("{db: {type: string, enum: [a]}}"),
			want: []Change{{Path: "db", Kind: TypeChanged, Detail: "type changed from object to string"}},
		},
		{
			name: "typeOfRootChanged",
			old:  params("{size: {type: integer}}"),
			new:  "{type: array, items: {type: string}}",
			want: []Change{{Path: "", Kind: TypeChanged, Detail: "type changed from object to array"}},
		},
		{
			name: "typeOfArrayItemsChanged",
			old:  params("{ports: {type: array, items: {type: integer}}}"),
			new:  params("{ports: {type: array, items: {type: string}}}"),
			want: []Change{{Path: "ports[*]", Kind: TypeChanged, Detail: "type changed from integer to string"}},
		},
		{
			name: "typeInArrayOfObjectsChanged",
			old:  params("{tags: {type: array, items: {type: object, properties: {value: {type: string}}}}}"),
			new:  params("{tags: {type: array, items: {type: object, properties: {value: {type: boolean}}}}}"),
			want: []Change{{Path: "tags[*].value", Kind: TypeChanged, Detail: "type changed from string to boolean"}},
		},
		{
			name: "typeNarrowedFromNumberToInteger",
			old:  params("{ratio: {type: number}}"),
			new:  params("{ratio: {type: integer}}"),
			want: []Change{{Path: "ratio", Kind: TypeChanged, Detail: "type changed from number to integer"}},
		},
		{
			name: "typeWidenedFromIntegerToNumber",
			old:  params("{ratio: {type: integer}}"),
			new:  params("{ratio: {type: number}}"),
		},
		{
			name: "typeWidenedToIntOrString",
			old:  params("{port: {type: integer}, name: {type: string}}"),
			new:  params("{port: {x-kubernetes-int-or-string: true}, name: {x-kubernetes-int-or-string: true}}"),
		},
		{
			name: "typeWidenedToAny",
			old:  params("{config: {type: object, properties: {a: {type: string}}}}"),
			new:  params("{config: {x-kubernetes-preserve-unknown-fields: true}}"),
		},
		{
			name: "typeNarrowedFromAny",
			old:  params("{config: {x-kubernetes-preserve-unknown-fields: true}}"),
			new:  params("{config: {type: object, x-kubernetes-preserve-unknown-fields: true}}"),
			want: []Change{{Path: "config", Kind: TypeChanged, Detail: "type changed from any to object"}},
		},
		{
			name: "intOrStringRemoved",
			old:  params("{port: {x-kubernetes-int-or-string: true}}"),
			new:  params("{port: {type: string}}"),
			want: []Change{{Path: "port", Kind: IntOrStringRemoved, Detail: "x-kubernetes-int-or-string removed: only string values are allowed"}},
		},
		{
			name: "intOrStringReplacedByAnotherType",
			old:  params("{port: {x-kubernetes-int-or-string: true}}"),
			new:  params("{port: {type: number}}"),
			want: []Change{{Path: "port", Kind: TypeChanged, Detail: "type changed from int-or-string to number"}},
		},

		// Required.
		{
			name: "requiredAddedToExistingProperty",
			old:  params("{owner: {type: string}}"),
			new:  "{type: object, required: [owner], properties: {owner: {type: string}}}",
			want: []Change{{Path: "owner", Kind: RequiredAdded, Detail: "newly required without a default"}},
		},
		{
			name: "newRequiredProperty",
			old:  params("{tier: {type: string}}"),
			new:  "{type: object, required: [owner], properties: {tier: {type: string}, owner: {type: string}}}",
			want: []Change{{Path: "owner", Kind: RequiredAdded, Detail: "newly required without a default"}},
		},
		{
			name: "requiredAddedInNestedObject",
			old:  params("{db: {type: object, properties: {name: {type: string}}}}"),
			new:  params("{db: {type: object, required: [name], properties: {name: {type: string}}}}"),
			want: []Change{{Path: "db.name", Kind: RequiredAdded, Detail: "newly required without a default"}},
		},
		{
			name: "newRequiredPropertyWithDefault",
			old:  params("{tier: {type: string}}"),
			new:  "{type: object, required: [owner, tier], properties: {tier: {type: string, default: bronze}, owner: {type: string, default: platform}}}",
		},
		{
			name: "requiredRemoved",
			old:  "{type: object, required: [owner], properties: {owner: {type: string}}}",
			new:  params("{owner: {type: string}}"),
		},
		{
			name: "defaultOfRequiredPropertyRemoved",
			old:  "{type: object, required: [owner], properties: {owner: {type: string, default: platform}}}",
			new:  "{type: object, required: [owner], properties: {owner: {type: string}}}",
			want: []Change{{Path: "owner", Kind: RequiredAdded, Detail: "required, and its default was removed"}},
		},
		{
			name: "defaultAddedOrChanged",
			old:  params("{tier: {type: string}, size: {type: integer, default: 1}}"),
			new:  params("{tier: {type: string, default: bronze}, size: {type: integer, default: 2}}"),
		},

		// Enums.
		{
			name: "enumNarrowed",
			old:  params("{tier: {type: string, enum: [bronze, silver, gold]}}"),
			new:  params("{tier: {type: string, enum: [bronze]}}"),
			want: []Change{{Path: "tier", Kind: EnumNarrowed, Detail: `enum no longer allows "silver", "gold"`}},
		},
		{
			name: "enumAdded",
			old:  params("{tier: {type: string}}"),
			new:  params("{tier: {type: string, enum: [bronze, silver]}}"),
			want: []Change{{Path: "tier", Kind: EnumNarrowed, Detail: `enum added: only "bronze", "silver" allowed`}},
		},
		{
			name: "enumWidenedReorderedOrRespelled",
			old:  params(`{tier: {type: string, enum: [gold, silver]}, size: {type: number, enum: [1.0, 2]}, obj: {type: object, enum: [{a: 1, b: 2}]}}`),
			new:  params(`{tier: {type: string, enum: [bronze, silver, gold]}, size: {type: number, enum: [2, 1]}, obj: {type: object, enum: [{b: 2, a: 1}]}}`),
		},
		{
			name: "enumRemoved",
			old:  params("{tier: {type: string, enum: [gold]}}"),
			new:  params("{tier: {type: string}}"),
		},

		// Formats and patterns.
		{
			name: "formatAdded",
			old:  params("{contact: {type: string}}"),
			new:  params("{contact: {type: string, format: email}}"),
			want: []Change{{Path: "contact", Kind: FormatChanged, Detail: `format "email" added`}},
		},
		{
			name: "formatChanged",
			old:  params("{id: {type: string, format: uuid}}"),
			new:  params("{id: {type: string, format: uuid4}}"),
			want: []Change{{Path: "id", Kind: FormatChanged, Detail: `format changed from "uuid" to "uuid4"`}},
		},
		{
			name: "formatRemovedOrNumeric",
			old:  params("{id: {type: string, format: uuid}, size: {type: integer, format: int32}, ratio: {type: number}}"),
			new:  params("{id: {type: string}, size: {type: integer, format: int64}, ratio: {type: number, format: float}}"),
		},
		{
			name: "patternAdded",
			old:  params("{name: {type: string}}"),
			new:  params(`{name: {type: string, pattern: '^[a-z]\d+$'}}`),
			want: []Change{{Path: "name", Kind: PatternChanged, Detail: "pattern `^[a-z]\\d+$` added"}},
		},
		{
			name: "patternChanged",
			old:  params("{name: {type: string, pattern: '^[a-z]+$'}}"),
			new:  params("{name: {type: string, pattern: '^[a-z0-9]+$'}}"),
			want: []Change{{Path: "name", Kind: PatternChanged, Detail: "pattern changed from `^[a-z]+$` to `^[a-z0-9]+$`"}},
		},
		{
			name: "patternRemoved",
			old:  params("{name: {type: string, pattern: '^[a-z]+$'}}"),
			new:  params("{name: {type: string}}"),
		},

		// Bounds.
		{
			name: "numericBoundsNarrowed",
			old:  params("{a: {type: integer}, b: {type: integer, maximum: 10}, c: {type: integer, maximum: 10}, d: {type: number, minimum: 0}, e: {type: number, minimum: 0}, f: {type: number}}"),
			new:  params("{a: {type: integer, maximum: 5, exclusiveMaximum: true}, b: {type: integer, maximum: 5}, c: {type: integer, maximum: 10, exclusiveMaximum: true}, d: {type: number, minimum: 1}, e: {type: number, minimum: 0, exclusiveMinimum: true}, f: {type: number, minimum: -1.5}}"),
			want: []Change{
				{Path: "a", Kind: BoundsNarrowed, Detail: "maximum added: < 5"},
				{Path: "b", Kind: BoundsNarrowed, Detail: "maximum lowered from <= 10 to <= 5"},
				{Path: "c", Kind: BoundsNarrowed, Detail: "maximum lowered from <= 10 to < 10"},
				{Path: "d", Kind: BoundsNarrowed, Detail: "minimum raised from >= 0 to >= 1"},
				{Path: "e", Kind: BoundsNarrowed, Detail: "minimum raised from >= 0 to > 0"},
				{Path: "f", Kind: BoundsNarrowed, Detail: "minimum added: >= -1.5"},
			},
		},
		{
			name: "numericBoundsLoosened",
			old:  params("{a: {type: integer, maximum: 5}, b: {type: integer, maximum: 10, exclusiveMaximum: true}, c: {type: number, minimum: 1}, d: {type: number, minimum: 0, exclusiveMinimum: true}, e: {type: integer, maximum: 3, minimum: 1}}"),
			new:  params("{a: {type: integer, maximum: 10}, b: {type: integer, maximum: 10}, c: {type: number, minimum: 0}, d: {type: number, minimum: 0}, e: {type: integer}}"),
		},
		{
			name: "multipleOf",
			old:  params("{a: {type: integer}, b: {type: integer, multipleOf: 2}, c: {type: integer, multipleOf: 4}}"),
			new:  params("{a: {type: integer, multipleOf: 3}, b: {type: integer, multipleOf: 4}, c: {type: integer, multipleOf: 2}}"),
			want: []Change{
				{Path: "a", Kind: BoundsNarrowed, Detail: "multipleOf 3 added"},
				{Path: "b", Kind: BoundsNarrowed, Detail: "multipleOf changed from 2 to 4"},
			},
		},
		{
			name: "lengthItemsAndPropertiesBoundsNarrowed",
			old:  params("{name: {type: string, maxLength: 63}, code: {type: string}, list: {type: array, items: {type: string}, maxItems: 10, minItems: 1}, obj: {type: object, additionalProperties: {type: string}, minProperties: 1}}"),
			new:  params("{name: {type: string, maxLength: 32}, code: {type: string, minLength: 2}, list: {type: array, items: {type: string}, maxItems: 5, minItems: 2}, obj: {type: object, additionalProperties: {type: string}, maxProperties: 8, minProperties: 2}}"),
			want: []Change{
				{Path: "code", Kind: BoundsNarrowed, Detail: "minLength 2 added"},
				{Path: "list", Kind: BoundsNarrowed, Detail: "maxItems lowered from 10 to 5"},
				{Path: "list", Kind: BoundsNarrowed, Detail: "minItems raised from 1 to 2"},
				{Path: "name", Kind: BoundsNarrowed, Detail: "maxLength lowered from 63 to 32"},
				{Path: "obj", Kind: BoundsNarrowed, Detail: "maxProperties 8 added"},
				{Path: "obj", Kind: BoundsNarrowed, Detail: "minProperties raised from 1 to 2"},
			},
		},
		{
			name: "lengthItemsAndPropertiesBoundsLoosened",
			old:  params("{name: {type: string, maxLength: 32, minLength: 2}, list: {type: array, items: {type: string}, maxItems: 5, minItems: 2}, obj: {type: object, maxProperties: 3}}"),
			new:  params("{name: {type: string, maxLength: 63, minLength: 0}, list: {type: array, items: {type: string}, minItems: 1}, obj: {type: object, minProperties: 0}}"),
		},

		// Nullable.
		{
			name: "nullableRemoved",
			old:  params("{size: {type: integer, nullable: true}}"),
			new:  params("{size: {type: integer}}"),
			want: []Change{{Path: "size", Kind: NullableRemoved, Detail: "null no longer allowed"}},
		},
		{
			name: "nullableAdded",
			old:  params("{size: {type: integer}}"),
			new:  params("{size: {type: integer, nullable: true}}"),
		},

		// Maps and unknown fields.
		{
			name: "mapValueTypeChanged",
			old:  params("{labels: {type: object, additionalProperties: {type: string}}}"),
			new:  params("{labels: {type: object, additionalProperties: {type: integer}}}"),
			want: []Change{{Path: "labels{*}", Kind: TypeChanged, Detail: "type changed from string to integer"}},
		},
		{
			name: "mapValueNarrowedInMapOfArrays",
			old:  params("{groups: {type: object, additionalProperties: {type: array, items: {type: string}}}}"),
			new:  params("{groups: {type: object, additionalProperties: {type: array, items: {type: string, maxLength: 8}}}}"),
			want: []Change{{Path: "groups{*}[*]", Kind: BoundsNarrowed, Detail: "maxLength 8 added"}},
		},
		{
			name: "mapRemoved",
			old:  params("{labels: {type: object, additionalProperties: {type: string}}}"),
			new:  params("{labels: {type: object, properties: {team: {type: string}}}}"),
			want: []Change{{Path: "labels", Kind: AdditionalPropertiesNarrowed, Detail: "additionalProperties removed: fields the schema does not declare are pruned"}},
		},
		{
			name: "mapOfAnythingGivenAValueSchema",
			old:  params("{labels: {type: object, additionalProperties: true}}"),
			new:  params("{labels: {type: object, additionalProperties: {type: string}}}"),
			want: []Change{{Path: "labels{*}", Kind: TypeChanged, Detail: "type changed from any to string"}},
		},
		{
			name: "mapAddedOrWidened",
			old:  params("{labels: {type: object}, annotations: {type: object, additionalProperties: {type: string, maxLength: 10}}}"),
			new:  params("{labels: {type: object, additionalProperties: {type: string}}, annotations: {type: object, additionalProperties: true}}"),
		},
		{
			name: "preserveUnknownFieldsRemoved",
			old:  "{type: object, x-kubernetes-preserve-unknown-fields: true, properties: {extra: {type: object, x-kubernetes-preserve-unknown-fields: true}}}",
			new:  "{type: object, properties: {extra: {type: object}}}",
			want: []Change{
				{Path: "", Kind: PreserveUnknownFieldsRemoved, Detail: "x-kubernetes-preserve-unknown-fields removed: fields the schema does not declare are no longer kept as they are"},
				{Path: "extra", Kind: PreserveUnknownFieldsRemoved, Detail: "x-kubernetes-preserve-unknown-fields removed: fields the schema does not declare are no longer kept as they are"},
			},
		},
		{
			name: "preserveUnknownFieldsAdded",
			old:  params("{extra: {type: object}}"),
			new:  params("{extra: {type: object, x-kubernetes-preserve-unknown-fields: true}}"),
		},
		{
			name: "embeddedResourceChanged",
			old:  params("{a: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}, b: {type: object, x-kubernetes-preserve-unknown-fields: true}}"),
			new:  params("{a: {type: object, x-kubernetes-preserve-unknown-fields: true}, b: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}}"),
			want: []Change{
				{Path: "a", Kind: EmbeddedResourceChanged, Detail: "x-kubernetes-embedded-resource removed: apiVersion, kind and metadata are pruned unless declared"},
				{Path: "b", Kind: EmbeddedResourceChanged, Detail: "x-kubernetes-embedded-resource added: apiVersion and kind are required"},
			},
		},

		// Lists.
		{
			name: "listTypeChanged",
			old:  params("{a: {type: array, items: {type: string}}, b: {type: array, items: {type: string}, x-kubernetes-list-type: set}}"),
			new:  params("{a: {type: array, items: {type: string}, x-kubernetes-list-type: set}, b: {type: array, items: {type: string}, x-kubernetes-list-type: atomic}}"),
			want: []Change{
				{Path: "a", Kind: ListTypeChanged, Detail: "x-kubernetes-list-type changed from atomic to set"},
				{Path: "b", Kind: ListTypeChanged, Detail: "x-kubernetes-list-type changed from set to atomic"},
			},
		},
		{
			name: "listMapKeysChanged",
			old:  params("{ports: {type: array, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [name], items: {type: object, required: [name], properties: {name: {type: string}, zone: {type: string, default: a}}}}}"),
			new:  params("{ports: {type: array, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [name, zone], items: {type: object, required: [name, zone], properties: {name: {type: string}, zone: {type: string, default: a}}}}}"),
			want: []Change{{Path: "ports", Kind: ListTypeChanged, Detail: "x-kubernetes-list-map-keys changed from [name] to [name, zone]"}},
		},
		{
			name: "listTypeUnsetIsAtomic",
			old:  params("{a: {type: array, items: {type: string}}}"),
			new:  params("{a: {type: array, items: {type: string}, x-kubernetes-list-type: atomic}}"),
		},

		// CEL rules.
		{
			name: "validationRuleAddedOrChanged",
			old:  params(`{size: {type: integer, x-kubernetes-validations: [{rule: "self >= 1"}]}}`),
			new:  params(`{size: {type: integer, x-kubernetes-validations: [{rule: "self >= 2"}, {rule: "self != 3 || self == \"x\""}]}}`),
			want: []Change{
				{Path: "size", Kind: ValidationRuleAdded, Detail: "validation rule `self != 3 || self == \"x\"` added"},
				{Path: "size", Kind: ValidationRuleAdded, Detail: "validation rule `self >= 2` added"},
			},
		},
		{
			name: "validationRuleRemovedOrReworded",
			old:  params(`{size: {type: integer, x-kubernetes-validations: [{rule: "self >= 1", message: "at least one"}, {rule: "self < 9"}]}}`),
			new:  params(`{size: {type: integer, x-kubernetes-validations: [{rule: "self >= 1", message: "one or more", reason: FieldValueInvalid}]}}`),
		},

		// Composition.
		{
			name: "compositionAddedOrChanged",
			old:  params("{a: {type: string}, b: {type: string, anyOf: [{maxLength: 5}, {pattern: x}]}, c: {type: string}}"),
			new:  params("{a: {type: string, allOf: [{maxLength: 5}]}, b: {type: string, anyOf: [{maxLength: 5}]}, c: {type: string, not: {enum: [x]}}}"),
			want: []Change{
				{Path: "a", Kind: CompositionChanged, Detail: "allOf added"},
				{Path: "b", Kind: CompositionChanged, Detail: "anyOf changed"},
				{Path: "c", Kind: CompositionChanged, Detail: "not added"},
			},
		},
		{
			name: "compositionRemovedOrRespelled",
			old:  params("{a: {type: string, oneOf: [{maxLength: 5}]}, b: {type: string, allOf: [{enum: [1.0]}]}}"),
			new:  params("{a: {type: string}, b: {type: string, allOf: [{enum: [1]}]}}"),
		},

		// Documentation.
		{
			name: "documentationChanged",
			old:  params("{size: {type: integer, description: old, title: Size, example: 1}}"),
			new:  "{type: object, description: new, externalDocs: {url: 'https://example.com'}, properties: {size: {type: integer, description: new, title: The size, example: 2}}}",
		},

		// Several changes at one path, in order of kind.
		{
			name: "severalChangesAtOnePath",
			old:  params("{tier: {type: string, nullable: true, enum: [bronze, gold]}}"),
			new:  params("{tier: {type: string, enum: [bronze], maxLength: 6, pattern: '^b', x-kubernetes-validations: [{rule: \"self != 'x'\"}]}}"),
			want: []Change{
				{Path: "tier", Kind: BoundsNarrowed, Detail: "maxLength 6 added"},
				{Path: "tier", Kind: EnumNarrowed, Detail: `enum no longer allows "gold"`},
				{Path: "tier", Kind: NullableRemoved, Detail: "null no longer allowed"},
				{Path: "tier", Kind: PatternChanged, Detail: "pattern `^b` added"},
				{Path: "tier", Kind: ValidationRuleAdded, Detail: "validation rule `self != 'x'` added"},
			},
		},

		// Nil schemas.
		{name: "bothNil"},
		{
			name: "oldNil",
			new:  "{type: object, required: [owner], properties: {owner: {type: string}}}",
		},
		{
			name: "newNilRemovesEveryProperty",
			old:  params("{size: {type: integer}, db: {type: object, properties: {name: {type: string}}}}"),
			want: []Change{
				{Path: "db", Kind: PropertyRemoved, Detail: "property removed"},
				{Path: "size", Kind: PropertyRemoved, Detail: "property removed"},
			},
		},
		{
			name: "unchanged",
			old:  params("{size: {type: integer, maximum: 3}, tags: {type: array, items: {type: object, properties: {k: {type: string}}}}, labels: {type: object, additionalProperties: {type: string}}}"),
			new:  params("{size: {type: integer, maximum: 3}, tags: {type: array, items: {type: object, properties: {k: {type: string}}}}, labels: {type: object, additionalProperties: {type: string}}}"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Breaking(schema(t, tt.old), schema(t, tt.new))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Breaking() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBreaking_SameResultEveryTime(t *testing.T) {
	// Many properties, maps and arrays, so that map iteration order would show.
	var oldProps, newProps []string
	for i := range 40 {
		oldProps = append(oldProps, fmt.Sprintf("p%02d: {type: object, properties: {a: {type: string}, b: {type: integer}}, additionalProperties: false}", i))
		newProps = append(newProps, fmt.Sprintf("p%02d: {type: object, properties: {b: {type: string}, c: {type: integer}}, required: [c]}", i))
	}
	old := schema(t, params("{"+strings.Join(oldProps, ", ")+"}"))
	new := schema(t, params("{"+strings.Join(newProps, ", ")+"}"))
	first := Breaking(old, new)
	if len(first) != 40*3 {
		t.Fatalf("Breaking() = %d changes; want %d: %v", len(first), 40*3, first)
	}
	if !slices.IsSortedFunc(first, func(a, b Change) int { return strings.Compare(a.Path+" "+string(a.Kind), b.Path+" "+string(b.Kind)) }) {
		t.Errorf("Breaking() is not sorted by path and kind: %v", first)
	}
	for range 20 {
		if diff := cmp.Diff(first, Breaking(old, new)); diff != "" {
			t.Fatalf("Breaking() differs between calls (-first +later):\n%s", diff)
		}
	}
}

func TestBreaking_DoesNotModifyItsArguments(t *testing.T) {
	y := "{type: object, x-kubernetes-preserve-unknown-fields: true, properties: {a: {type: array}, m: {type: object, additionalProperties: true}}}"
	old, new := schema(t, y), schema(t, params("{a: {type: array, items: {type: string}}, m: {type: object, additionalProperties: {type: string}}}"))
	Breaking(old, new)
	if diff := cmp.Diff(schema(t, y), old); diff != "" {
		t.Errorf("Breaking() modified old (-before +after):\n%s", diff)
	}
}

func TestChange_String_NamesPathAndChange(t *testing.T) {
	changes := Breaking(
		schema(t, params("{size: {type: integer}, tier: {type: string, enum: [gold, silver]}}")),
		schema(t, "{type: object, required: [owner], properties: {size: {type: string}, tier: {type: string, enum: [silver]}, owner: {type: string}}}"),
	)
	var got []string
	for _, c := range changes {
		got = append(got, c.Under("spec.parameters").String())
	}
	want := []string{
		"spec.parameters.owner: newly required without a default",
		"spec.parameters.size: type changed from integer to string",
		`spec.parameters.tier: enum no longer allows "gold"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("String() mismatch (-want +got):\n%s", diff)
	}
	if got, want := (Change{Kind: TypeChanged, Detail: "type changed from object to string"}).String(), "(root): type changed from object to string"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
}

func TestChange_Under_PlacesPathBelowRoot(t *testing.T) {
	tests := []struct{ path, root, want string }{
		{path: "", root: "spec.parameters", want: "spec.parameters"},
		{path: "size", root: "spec.parameters", want: "spec.parameters.size"},
		{path: "[*].key", root: "spec.tags", want: "spec.tags[*].key"},
		{path: "{*}", root: "spec.labels", want: "spec.labels{*}"},
		{path: `["a.b"]`, root: "spec", want: `spec["a.b"]`},
		{path: "size", root: "", want: "size"},
	}
	for _, tt := range tests {
		if got := (Change{Path: tt.path}).Under(tt.root).Path; got != tt.want {
			t.Errorf("Change{Path: %q}.Under(%q).Path = %q; want %q", tt.path, tt.root, got, tt.want)
		}
	}
}
