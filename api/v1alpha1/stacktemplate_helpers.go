package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultTemplateVersion is a template kind's version when spec.api.version is unset.
const DefaultTemplateVersion = "v1alpha1"

// GVK is the kind the template defines, in its storage version: the version Stackwright
// reads instances in.
func (t *StackTemplate) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: t.Spec.API.Group, Version: t.StorageVersion(), Kind: t.Spec.API.Kind}
}

// KindVersions returns the versions of the template's kind, oldest first: spec.versions,
// or else the one version spec.api.version, with spec.parameters, served and stored.
func (t *StackTemplate) KindVersions() []TemplateVersion {
	if len(t.Spec.Versions) > 0 {
		return t.Spec.Versions
	}
	v := t.Spec.API.Version
	if v == "" {
		v = DefaultTemplateVersion
	}
	return []TemplateVersion{{Name: v, Storage: true, Parameters: t.Spec.Parameters}}
}

// StorageVersion returns the version instances are stored in (the last one marked so,
// should admission have let two through).
func (t *StackTemplate) StorageVersion() string {
	versions := t.KindVersions()
	name := versions[len(versions)-1].Name
	for _, v := range versions {
		if v.Storage {
			name = v.Name
		}
	}
	return name
}

// IsServed reports whether the API server serves the version.
func (v *TemplateVersion) IsServed() bool { return v.Served == nil || *v.Served }

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
	spec := t.Spec.DeepCopy()
	return StackTemplateRevisionSpec{
		Template: t.Name, Revision: rev, Stack: spec.Stack, Config: spec.Config, Outputs: spec.Outputs,
		Stacks: spec.Stacks, Objects: spec.Objects, ParametersVersion: t.StorageVersion(),
	}
}

// RenamesParameters reports whether a version renames parameters of the one before it:
// its instances are then converted between versions by the manager's conversion webhook.
func (t *StackTemplate) RenamesParameters() bool {
	return slices.ContainsFunc(t.KindVersions(), func(v TemplateVersion) bool { return len(v.Renames) > 0 })
}

// PublishedOutputs are the outputs an instance of the template receives: those of
// spec.outputs and of each of spec.stacks.
func (t *StackTemplate) PublishedOutputs() []string {
	return publishedOutputs(t.Spec.Outputs, t.Spec.Stacks)
}

// PublishedOutputs are the outputs an instance rendered from the revision receives.
func (r *StackTemplateRevisionSpec) PublishedOutputs() []string {
	return publishedOutputs(r.Outputs, r.Stacks)
}

func publishedOutputs(outputs []string, stacks []TemplateStack) []string {
	all := slices.Clone(outputs)
	for _, s := range stacks {
		all = append(all, s.Outputs...)
	}
	return all
}

// Digest is the digest of what the revision renders (its stacks, config, outputs and
// objects), "sha256:<hex>": two revisions with the same digest render the same Stacks.
func (s *StackTemplateRevisionSpec) Digest() string {
	// Marshalling these types cannot fail: they hold JSON already.
	b, _ := json.Marshal(struct {
		Stack   apiextensionsv1.JSON `json:"stack"`
		Config  []TemplateConfig     `json:"config"`
		Outputs []string             `json:"outputs"`
		Stacks  []TemplateStack      `json:"stacks,omitempty"`
		Objects []TemplateObject     `json:"objects,omitempty"`
	}{s.Stack, s.Config, s.Outputs, s.Stacks, s.Objects})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// HeldTemplateRevision is the template revision an instance's Stack with these labels and
// annotations has: the one it was rendered from (TemplateRevisionLabel), or, while it only
// previews another for a rollout's preview gate (RolloutPreviewAnnotation Preview), the one
// it had before (TemplateRevisionHeldAnnotation). 0 when it names none.
func HeldTemplateRevision(labels, annotations map[string]string) int64 {
	v := labels[TemplateRevisionLabel]
	if annotations[RolloutPreviewAnnotation] == RolloutPreviewOnly {
		if held, ok := annotations[TemplateRevisionHeldAnnotation]; ok {
			v = held
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
