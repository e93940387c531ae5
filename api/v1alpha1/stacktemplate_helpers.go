package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultTemplateVersion is a template kind's version when spec.api.version is unset.
const DefaultTemplateVersion = "v1alpha1"

// GVK is the kind the template defines.
func (t *StackTemplate) GVK() schema.GroupVersionKind {
	v := t.Spec.API.Version
	if v == "" {
		v = DefaultTemplateVersion
	}
	return schema.GroupVersionKind{Group: t.Spec.API.Group, Version: v, Kind: t.Spec.API.Kind}
}

// DefinitionName is the name of the CustomResourceDefinition of the template's kind.
func (t *StackTemplate) DefinitionName() string {
	return t.Spec.API.Plural + "." + t.Spec.API.Group
}

// RevisionName is the name of the StackTemplateRevision of the template's revision rev:
// <template>-<rev>, its template part shortened with a hash when the whole would not be a
// valid name.
func RevisionName(template string, rev int64) string {
	suffix := "-" + strconv.FormatInt(rev, 10)
	if len(template)+len(suffix) <= validation.DNS1123SubdomainMaxLength {
		return template + suffix
	}
	sum := sha256.Sum256([]byte(template))
	hash := "-" + hex.EncodeToString(sum[:])[:8]
	keep := validation.DNS1123SubdomainMaxLength - len(suffix) - len(hash)
	return strings.TrimRight(template[:keep], "-.") + hash + suffix
}

// Snapshot is the template's current spec as a revision: what its instances are rendered
// from.
func (t *StackTemplate) Snapshot(rev int64) StackTemplateRevisionSpec {
	return StackTemplateRevisionSpec{
		Template: t.Name, Revision: rev, Stack: *t.Spec.Stack.DeepCopy(),
		Config: slices.Clone(t.Spec.Config), Outputs: slices.Clone(t.Spec.Outputs),
	}
}
