package v1alpha1

import "k8s.io/apimachinery/pkg/runtime/schema"

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
