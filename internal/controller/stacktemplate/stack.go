package stacktemplate

import (
	"bytes"
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// StackSpec decodes the template's spec.stack, refusing a field the Stack kind does not
// know: a typo there would otherwise be dropped silently from every instance's Stack.
func StackSpec(t *v1alpha1.StackTemplate) (pulumiv1.StackSpec, error) {
	return DecodeStack(t.Spec.Stack, "spec.stack")
}

// DecodeStack decodes a template's (or a revision's) Stack spec, at field, strictly.
func DecodeStack(raw apiextensionsv1.JSON, field string) (pulumiv1.StackSpec, error) {
	var spec pulumiv1.StackSpec
	if len(raw.Raw) == 0 {
		return spec, fmt.Errorf("%s is not set", field)
	}
	dec := json.NewDecoder(bytes.NewReader(raw.Raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return spec, fmt.Errorf("%s is not a Stack's spec: %w", field, err)
	}
	if spec.Stack == "" {
		return spec, fmt.Errorf("%s.stack is not set: it is the prefix of every instance's stack name", field)
	}
	return spec, nil
}
