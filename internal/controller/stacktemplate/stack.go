package stacktemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// StackSpec decodes the template's spec.stack, refusing a field the Stack kind does not
// know: a typo there would otherwise be dropped silently from every instance's Stack.
func StackSpec(t *v1alpha1.StackTemplate) (pulumiv1.StackSpec, error) {
	return DecodeStack(t.Spec.Stack)
}

// DecodeStack decodes a template's (or a revision's) spec.stack strictly.
func DecodeStack(raw apiextensionsv1.JSON) (pulumiv1.StackSpec, error) {
	var spec pulumiv1.StackSpec
	if len(raw.Raw) == 0 {
		return spec, errors.New("spec.stack is not set")
	}
	dec := json.NewDecoder(bytes.NewReader(raw.Raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return spec, fmt.Errorf("spec.stack is not a Stack's spec: %w", err)
	}
	if spec.Stack == "" {
		return spec, errors.New("spec.stack.stack is not set: it is the prefix of every instance's stack name")
	}
	return spec, nil
}
