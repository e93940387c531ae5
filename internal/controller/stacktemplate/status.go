package stacktemplate

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stackwright/stackwright/api/conditions"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The setters below are pure functions of the template they are given; the phases decide
// which one applies and the deferred patch persists the result.

// markGroupNotAllowed stalls a template of an API group the install does not serve.
func markGroupNotAllowed(t *v1alpha1.StackTemplate, allowed []string) {
	conditions.MarkStalled(t, v1alpha1.ReasonAPIGroupNotAllowed, fmt.Sprintf(
		"this install serves templates of the API groups %v only (--template-api-groups), not %s", allowed, t.Spec.API.Group))
}

// markInvalid stalls a template whose spec cannot be served as written.
func markInvalid(t *v1alpha1.StackTemplate, msg string) {
	conditions.MarkStalled(t, v1alpha1.ReasonTemplateInvalid, msg)
}

// markConversionUnavailable stalls a template whose renames need the conversion webhook
// this manager does not serve.
func markConversionUnavailable(t *v1alpha1.StackTemplate) {
	conditions.MarkStalled(t, v1alpha1.ReasonConversionUnavailable,
		"a version renames parameters, which the API server converts only through the manager's conversion webhook, and this manager serves none: start it with --conversion-webhook-bind-address (the chart does when templates.apiGroups is set), or publish the version without renames")
}

// markObjectKindNotAllowed stalls a template whose objects are of kinds the install does
// not let templates make.
func markObjectKindNotAllowed(t *v1alpha1.StackTemplate, allowed []schema.GroupKind, err error) {
	conditions.MarkStalled(t, v1alpha1.ReasonObjectKindNotAllowed, fmt.Sprintf(
		"this install lets templates make objects of the kinds %v only (--template-object-kinds): %v", allowed, err))
}

// markBreakingChange stalls a template whose schemas would break instances, naming each
// change.
func markBreakingChange(t *v1alpha1.StackTemplate, changes []string) {
	conditions.MarkStalled(t, v1alpha1.ReasonBreakingChange, fmt.Sprintf(
		"the change would break instances, so the kind keeps serving its previous schemas: %s. Publish the change as a new version whose schema still reads what earlier versions wrote (new properties optional or defaulted)",
		strings.Join(changes, "; ")))
}

// markDefinitionConflict stalls a template whose kind's definition name is taken.
func markDefinitionConflict(t *v1alpha1.StackTemplate, crd string) {
	conditions.MarkStalled(t, v1alpha1.ReasonDefinitionConflict, fmt.Sprintf(
		"CustomResourceDefinition %s exists and was not created for this template: Stackwright never takes one over", crd))
}

// markDefinitionRefused stalls a template whose definition the API server refused: only a
// new spec can change the answer.
func markDefinitionRefused(t *v1alpha1.StackTemplate, crd string, err error) {
	conditions.MarkStalled(t, v1alpha1.ReasonTemplateInvalid, fmt.Sprintf("the API server refused CustomResourceDefinition %s: %v", crd, err))
}

// markEstablishing records the wait for the API server to serve the definition.
func markEstablishing(t *v1alpha1.StackTemplate, crd string) {
	conditions.MarkReconciling(t, v1alpha1.ReasonEstablishing, "waiting for the API server to establish CustomResourceDefinition "+crd)
}

// markReady records that the template serves its kind at its current generation.
func markReady(t *v1alpha1.StackTemplate, crd string) {
	conditions.MarkReady(t, v1alpha1.ReasonServing, fmt.Sprintf("serving %s (%s) at revision %d", t.Spec.API.Kind, crd, t.Generation))
}

// markInstancesRemain records that a deleted template waits for its n instances, first
// (namespace/name) among them, to go.
func markInstancesRemain(t *v1alpha1.StackTemplate, n int, first string) {
	t.Status.Instances = int32(n)
	conditions.MarkReconciling(t, v1alpha1.ReasonInstancesRemain, fmt.Sprintf(
		"%d %s instance(s) remain, e.g. %s: the template is removed once they are deleted (each destroys its stack first)",
		n, t.Spec.API.Kind, first))
}

// finalizeStatus derives, at the end of every reconcile, what the outcome implies: the
// generation counts as observed only once the template is Ready or Stalled for it.
func finalizeStatus(t *v1alpha1.StackTemplate) {
	conditions.Finalize(t, &t.Status.ObservedGeneration)
}
