package instance

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation"

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
	return hashedName(template+"-"+namespace+"-"+name, template+"/"+namespace+"/"+name, maxStackObjectName, 16)
}

// legacyStackName is the name instances' Stacks had before: 32 bits of the hash. An
// instance whose Stack has it keeps it (locateStack); the instance and Stack UIDs keep a
// collision from touching another instance's objects.
func legacyStackName(template, namespace, name string) string {
	return hashedName(template+"-"+namespace+"-"+name, template+"/"+namespace+"/"+name, maxStackObjectName, 8)
}

// memberStackName is the name of the Stack of entry of a composed template's spec.stacks,
// for the instance namespace/name. Its hash covers the entry too: an instance's name has no
// slash, so no instance's Stack of spec.stack hashes alike.
func memberStackName(template, entry, namespace, name string) string {
	return hashedName(template+"-"+entry+"-"+namespace+"-"+name, template+"/"+namespace+"/"+name+"/"+entry, maxStackObjectName, 16)
}

// objectName is the name of the object entry of the template's spec.objects in the
// instance's namespace: <instance>-<entry>, or shortened with a hash.
func objectName(instance, entry string) string {
	if n := instance + "-" + entry; len(n) <= validation.DNS1123SubdomainMaxLength {
		return n
	}
	return hashedName(instance+"-"+entry, instance+"/"+entry, validation.DNS1123SubdomainMaxLength, 16)
}

// hashedName is base with a suffix of hexDigits of a hash of key, base shortened so that
// the whole is at most limit long.
func hashedName(base, key string, limit, hexDigits int) string {
	sum := sha256.Sum256([]byte(key))
	suffix := "-" + hex.EncodeToString(sum[:])[:hexDigits]
	if len(base) > limit-len(suffix) {
		base = strings.TrimRight(base[:limit-len(suffix)], "-.")
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

// render turns a template revision's Stack spec, its config and an instance's parameters
// into the instance's Stack spec, named stack. producers are the Stacks (by entry of
// spec.stacks) it depends on: their names become its prerequisites, and a config key read
// from one's output refers to the Secret or ConfigMap that Stack publishes its outputs
// to, as any Stack may read another's (the Stack controller then holds the producer while
// the consumer reads it).
func render(spec pulumiv1.StackSpec, config []v1alpha1.TemplateConfig, producers map[string]string, namespace, name, stack string, params map[string]any) (rendered, error) {
	out := rendered{spec: *spec.DeepCopy(), secrets: map[string][]byte{}}
	s := &out.spec
	s.Stack = pulumiStackName(spec.Stack, namespace, name)
	for _, entry := range slices.Sorted(maps.Keys(producers)) {
		if p := producers[entry]; !slices.ContainsFunc(s.Prerequisites, func(r pulumiv1.PrerequisiteRef) bool { return r.Name == p }) {
			s.Prerequisites = append(s.Prerequisites, pulumiv1.PrerequisiteRef{Name: p})
		}
	}
	for i, c := range config {
		if o := c.StackOutput; o != nil {
			unset(s, c.Key)
			from := outputsName(producers[o.Stack])
			if c.Secret {
				setSecretRef(s, c.Key, from, o.Output)
				continue
			}
			if s.ConfigRef == nil {
				s.ConfigRef = map[string]pulumiv1.ConfigMapRef{}
			}
			s.ConfigRef[c.Key] = pulumiv1.ConfigMapRef{Name: from, Key: o.Output}
			continue
		}
		v, ok := lookup(params, c.Parameter)
		if !ok {
			continue
		}
		unset(s, c.Key)
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
		setSecretRef(s, c.Key, parameterSecretName(stack), key)
	}
	if s.Stackwright == nil {
		s.Stackwright = &pulumiv1.StackwrightSpec{}
	}
	s.Stackwright.Outputs = &pulumiv1.OutputsExport{SecretName: outputsName(stack), ConfigMapName: outputsName(stack)}
	return out, nil
}

// unset removes whatever the template's Stack spec sets config key to.
func unset(s *pulumiv1.StackSpec, key string) {
	delete(s.Config, key)
	delete(s.ConfigRef, key)
	delete(s.Secrets, key)
	delete(s.SecretsRef, key)
}

// setSecretRef sets secret config key from the key of a Secret of the platform namespace.
func setSecretRef(s *pulumiv1.StackSpec, key, secret, secretKey string) {
	if s.SecretsRef == nil {
		s.SecretsRef = map[string]pulumiv1.ResourceRef{}
	}
	s.SecretsRef[key] = pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorSecret, ResourceSelector: pulumiv1.ResourceSelector{
		Secret: &pulumiv1.SecretSelector{Name: secret, Key: secretKey},
	}}
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
