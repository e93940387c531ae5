package instance

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// maxStackObjectName keeps a Stack's name a label value, so that its Updates carry the
// Stack label.
const maxStackObjectName = 63

// maxPulumiStackName is the Pulumi service's limit on a stack's name.
const maxPulumiStackName = 100

// stackName is the name of the Stack of template's instance namespace/name in the platform
// namespace: readable, and collision-free through 64 bits of a hash of all three (names
// may contain dashes, so the readable part alone could collide).
func stackName(template, namespace, name string) string {
	return hashedStackName(template, namespace, name, 16)
}

// legacyStackName is the name instances' Stacks had before: 32 bits of the hash. An
// instance whose Stack has it keeps it (locateStack); the instance and Stack UIDs keep a
// collision from touching another instance's objects.
func legacyStackName(template, namespace, name string) string {
	return hashedStackName(template, namespace, name, 8)
}

func hashedStackName(template, namespace, name string, hexDigits int) string {
	sum := sha256.Sum256([]byte(template + "/" + namespace + "/" + name))
	suffix := "-" + hex.EncodeToString(sum[:])[:hexDigits]
	base := template + "-" + namespace + "-" + name
	if len(base) > maxStackObjectName-len(suffix) {
		base = strings.TrimRight(base[:maxStackObjectName-len(suffix)], "-.")
	}
	return base + suffix
}

// pulumiStackName is <prefix>.<namespace>.<name>: unambiguous, since a namespace has no
// dots, and shortened with a hash when too long.
func pulumiStackName(prefix, namespace, name string) string {
	s := prefix + "." + namespace + "." + name
	if len(s) <= maxPulumiStackName {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	return strings.TrimRight(s[:maxPulumiStackName-len(suffix)], "-.") + suffix
}

// parameterSecretName is the Secret in the platform namespace that holds the secret
// config values of the Stack stack.
func parameterSecretName(stack string) string { return stack + "-parameters" }

// outputsName is the Secret and ConfigMap in the platform namespace that the Stack stack
// exports its outputs to.
func outputsName(stack string) string { return stack + "-outputs" }

// rendered is what an instance becomes in the platform namespace.
type rendered struct {
	spec pulumiv1.StackSpec
	// secrets is the parameter Secret's data; empty when no secret key is set.
	secrets map[string][]byte
}

// render turns a template revision's Stack spec and an instance's parameters into the
// instance's Stack spec, named stack.
func render(rev *v1alpha1.StackTemplateRevisionSpec, spec pulumiv1.StackSpec, namespace, name, stack string, params map[string]any) (rendered, error) {
	out := rendered{spec: *spec.DeepCopy(), secrets: map[string][]byte{}}
	s := &out.spec
	s.Stack = pulumiStackName(spec.Stack, namespace, name)
	for i, c := range rev.Config {
		v, ok := lookup(params, c.Parameter)
		if !ok {
			continue
		}
		delete(s.Config, c.Key)
		delete(s.Secrets, c.Key)
		delete(s.SecretsRef, c.Key)
		if !c.Secret {
			raw, err := json.Marshal(v)
			if err != nil {
				return rendered{}, fmt.Errorf("failed to encode parameter %s: %w", c.Parameter, err)
			}
			if s.Config == nil {
				s.Config = map[string]apiextensionsv1.JSON{}
			}
			s.Config[c.Key] = apiextensionsv1.JSON{Raw: raw}
			continue
		}
		text, ok := scalar(v)
		if !ok {
			return rendered{}, fmt.Errorf("parameter %s is secret config %s, so it must be a string, number or boolean", c.Parameter, c.Key)
		}
		key := "config-" + strconv.Itoa(i)
		out.secrets[key] = []byte(text)
		if s.SecretsRef == nil {
			s.SecretsRef = map[string]pulumiv1.ResourceRef{}
		}
		s.SecretsRef[c.Key] = pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorSecret, ResourceSelector: pulumiv1.ResourceSelector{
			Secret: &pulumiv1.SecretSelector{Name: parameterSecretName(stack), Key: key},
		}}
	}
	if s.Stackwright == nil {
		s.Stackwright = &pulumiv1.StackwrightSpec{}
	}
	s.Stackwright.Outputs = &pulumiv1.OutputsExport{SecretName: outputsName(stack), ConfigMapName: outputsName(stack)}
	return out, nil
}

// lookup finds the value at a dotted path in the parameters.
func lookup(params map[string]any, path string) (any, bool) {
	var cur any = params
	for field := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[field]; !ok {
			return nil, false
		}
	}
	return cur, cur != nil
}

// scalar is a string, number or boolean as config text.
func scalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case json.Number:
		return x.String(), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case int64:
		return strconv.FormatInt(x, 10), true
	}
	return "", false
}
