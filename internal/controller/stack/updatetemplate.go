package stack

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// PKO's spec.updateTemplate customises the auto.pulumi.com Updates PKO creates. What has a
// meaning for Stackwright's own Updates is honoured: spec.ttlAfterCompleted (how long the
// Stack's finished Updates are kept) and metadata.labels and annotations (put on the
// Updates it creates). Everything else is accepted and not applied (notApplied says which).

// reservedUpdateKeys are the label and annotation prefixes Stackwright's own records use:
// a template never overrides them.
var reservedUpdateKeys = []string{"stackwright.dev/", "pulumi.com/", "app.kubernetes.io/managed-by"}

// updateTTL is the Stack's updateTemplate.spec.ttlAfterCompleted, and why it is not used
// when it is set but cannot be (bad, "" otherwise).
func updateTTL(spec *pulumiv1.StackSpec) (ttl time.Duration, bad string) {
	t := spec.UpdateTemplate
	if t == nil || t.Spec == nil || t.Spec.TTLAfterCompleted == "" {
		return 0, ""
	}
	d, err := time.ParseDuration(t.Spec.TTLAfterCompleted)
	if err != nil || d <= 0 {
		return 0, fmt.Sprintf("spec.updateTemplate.spec.ttlAfterCompleted %q is not a positive duration (such as 1h30m) and is not applied", t.Spec.TTLAfterCompleted)
	}
	return d, ""
}

// templateMetadata returns the labels and annotations of the Stack's updateTemplate that its
// Updates get: valid keys and values outside Stackwright's own prefixes. skipped names the
// others.
func templateMetadata(spec *pulumiv1.StackSpec) (labels, annotations map[string]string, skipped []string) {
	t := spec.UpdateTemplate
	if t == nil || t.Metadata == nil {
		return nil, nil, nil
	}
	keep := func(kind string, in map[string]string, valid func(k, v string) bool) map[string]string {
		var out map[string]string
		for _, k := range slices.Sorted(maps.Keys(in)) {
			if reserved(k) || !valid(k, in[k]) {
				skipped = append(skipped, kind+" "+k)
				continue
			}
			if out == nil {
				out = map[string]string{}
			}
			out[k] = in[k]
		}
		return out
	}
	labels = keep("label", t.Metadata.Labels, func(k, v string) bool {
		return len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(v)) == 0
	})
	annotations = keep("annotation", t.Metadata.Annotations, func(k, _ string) bool {
		return len(validation.IsQualifiedName(strings.ToLower(k))) == 0
	})
	return labels, annotations, skipped
}

func reserved(key string) bool {
	for _, p := range reservedUpdateKeys {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// applyUpdateTemplate puts the Stack's template labels and annotations on u, under the
// ones Stackwright sets itself.
func applyUpdateTemplate(u *v1alpha1.Update, spec *pulumiv1.StackSpec) {
	labels, annotations, _ := templateMetadata(spec)
	for k, v := range labels {
		if _, ok := u.Labels[k]; !ok {
			if u.Labels == nil {
				u.Labels = map[string]string{}
			}
			u.Labels[k] = v
		}
	}
	for k, v := range annotations {
		if _, ok := u.Annotations[k]; !ok {
			if u.Annotations == nil {
				u.Annotations = map[string]string{}
			}
			u.Annotations[k] = v
		}
	}
}

// updateTemplateNotApplied lists what a Stack's updateTemplate sets that Stackwright does
// not apply: every field but spec.ttlAfterCompleted and metadata.labels and annotations,
// and those of them it cannot use.
func updateTemplateNotApplied(spec *pulumiv1.StackSpec) []string {
	t := spec.UpdateTemplate
	if t == nil {
		return nil
	}
	var fields []string
	set := func(prefix string, v any, honoured ...string) {
		raw, err := json.Marshal(v)
		if err != nil {
			return
		}
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil {
			return
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(honoured, k) {
				fields = append(fields, prefix+k)
			}
		}
	}
	set("", struct {
		APIVersion string `json:"apiVersion,omitempty"`
		Kind       string `json:"kind,omitempty"`
	}{t.APIVersion, t.Kind})
	if t.Status != nil {
		fields = append(fields, "status")
	}
	if t.Metadata != nil {
		set("metadata.", t.Metadata, "labels", "annotations")
	}
	if t.Spec != nil {
		set("spec.", t.Spec, "ttlAfterCompleted")
	}
	var out []string
	if len(fields) > 0 {
		out = append(out, fmt.Sprintf("spec.updateTemplate %s: accepted and not applied (Stackwright's Updates have their own shape; spec.ttlAfterCompleted and metadata.labels and annotations are applied)", strings.Join(fields, ", ")))
	}
	if _, bad := updateTTL(spec); bad != "" {
		out = append(out, bad)
	}
	if _, _, skipped := templateMetadata(spec); len(skipped) > 0 {
		out = append(out, fmt.Sprintf("spec.updateTemplate.metadata %s: not put on Updates (invalid, or a key Stackwright's own records use)", strings.Join(skipped, ", ")))
	}
	return out
}
