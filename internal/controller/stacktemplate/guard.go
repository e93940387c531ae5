package stacktemplate

import (
	"context"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/conversion"
	"github.com/stackwright/stackwright/internal/schemadiff"
)

// guardChanges stalls a template whose new definition would break instances. Versions are
// converted by their apiVersion alone (or by the conversion webhook, which moves renamed
// parameters and nothing else), so every version must read what an earlier one wrote,
// renamed; and a served version's schema must keep reading the instances already stored
// with it. A version instances are still stored in may not go (the API server would refuse
// it too, less clearly). Nothing is written until the template is changed.
func (r *Reconciler) guardChanges(ctx context.Context, s *scope) (bool, error) {
	want, versions := s.want, s.template.KindVersions()
	var changes []string
	for i, older := range want.Spec.Versions {
		for j := i + 1; j < len(want.Spec.Versions); j++ {
			newer := want.Spec.Versions[j]
			// What the webhook makes of an instance of older, read in newer.
			converted := conversion.Renamed(parametersOf(&older), versions, i, j)
			for _, c := range schemadiff.Breaking(converted, parametersOf(&newer)) {
				changes = append(changes, fmt.Sprintf("version %s does not read what %s wrote: %s", newer.Name, older.Name, c.Under("spec.parameters")))
			}
		}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: want.Name}, crd)
	switch {
	case apierrors.IsNotFound(err):
		// Nothing served yet, or not this template's: applyDefinition tells which.
	case err != nil:
		return false, fmt.Errorf("failed to get CustomResourceDefinition %s: %w", want.Name, err)
	case crd.Labels[v1alpha1.TemplateLabel] == s.template.Name:
		changes = append(changes, servedChanges(crd, want)...)
	}
	if len(changes) > 0 {
		markBreakingChange(s.template, changes)
		return false, nil
	}
	return true, nil
}

// servedChanges lists what want would break of what crd serves and stores.
func servedChanges(crd, want *apiextensionsv1.CustomResourceDefinition) []string {
	var changes []string
	for _, served := range crd.Spec.Versions {
		i := slices.IndexFunc(want.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == served.Name })
		if i < 0 {
			if slices.Contains(crd.Status.StoredVersions, served.Name) {
				changes = append(changes, fmt.Sprintf("version %s is removed while instances are stored in it: make another version the storage one, and remove %s once the definition's status.storedVersions no longer lists it", served.Name, served.Name))
			}
			continue
		}
		for _, c := range schemadiff.Breaking(parametersOf(&served), parametersOf(&want.Spec.Versions[i])) {
			changes = append(changes, fmt.Sprintf("version %s: %s", served.Name, c.Under("spec.parameters")))
		}
	}
	return changes
}

// parametersOf is the schema of spec.parameters in a version of a template's definition.
func parametersOf(v *apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.JSONSchemaProps {
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil
	}
	spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
	if !ok {
		return nil
	}
	params, ok := spec.Properties["parameters"]
	if !ok {
		return nil
	}
	return &params
}
