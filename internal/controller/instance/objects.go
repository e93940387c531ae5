package instance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/stacktemplate"
)

// renderedAnnotation, on an object of a template's spec.objects, is a hash of what it was
// last written as: the object is written again only when its rendering changes, since the
// API server's defaults would make every comparison with the live object differ.
const renderedAnnotation = "stackwright.dev/rendered"

// applyObjects makes the objects of the revision's spec.objects in the instance's
// namespace, owned by the instance, once the instance's Stacks are all Ready (the last of
// them, spec.stack's, is): they may read the Stacks' outputs, and are what the instance
// offers its namespace once it stands. Each is written only if it is of an allowed,
// namespaced kind, and never over an object the instance does not own.
func (c *Controller) applyObjects(ctx context.Context, s *scope) (bool, error) {
	if len(s.rev.Spec.Objects) == 0 || !readyAt(s.in, s.stack) {
		return true, nil
	}
	var waiting []string
	for _, o := range s.rev.Spec.Objects {
		obj, awaits, err := renderObject(o, s.params, s.outputs)
		var perr *parameterError
		switch {
		case errors.As(err, &perr):
			markParametersInvalid(s.in, fmt.Errorf("object %s of the template: %w", o.Name, err))
			return false, nil
		case err != nil:
			markObjectInvalid(s.in, o.Name, err)
			return false, nil
		case len(awaits) > 0:
			waiting = append(waiting, fmt.Sprintf("object %s waits for output(s) %s (not published; a secret output never fills an object)", o.Name, strings.Join(awaits, ", ")))
			continue
		}
		ok, err := c.applyObject(ctx, s, o.Name, obj)
		if !ok || err != nil {
			return false, err
		}
	}
	if len(waiting) > 0 {
		markAwaitingDependencies(s.in, waiting)
		return false, nil
	}
	return true, nil
}

// applyObject writes the rendered object obj of entry, stalling the instance when its kind
// is not one templates may make here, the API server refuses it, or its name is another's.
func (c *Controller) applyObject(ctx context.Context, s *scope, entry string, obj *unstructured.Unstructured) (bool, error) {
	u := s.in.obj
	gk := obj.GroupVersionKind().GroupKind()
	if !slices.Contains(c.ObjectKinds, gk) {
		markObjectInvalid(s.in, entry, fmt.Errorf("this install lets templates make objects of the kinds %v only (--template-object-kinds), not %s", c.ObjectKinds, gk))
		return false, nil
	}
	namespaced, err := c.Client.IsObjectNamespaced(obj)
	if err != nil || !namespaced {
		// Unknown to the API server, or cluster-scoped: the instance's namespace is the
		// only place an instance's objects go.
		markObjectInvalid(s.in, entry, fmt.Errorf("%s is not a namespaced kind the API server serves", gk))
		return false, nil //nolint:nilerr // a kind that cannot be mapped is an answer for the platform team, not a failure to retry
	}
	obj.SetNamespace(u.GetNamespace())
	obj.SetName(objectName(u.GetName(), entry))
	obj.SetLabels(labels.Merge(obj.GetLabels(), map[string]string{v1alpha1.TemplateLabel: s.template.Name, v1alpha1.InstanceUIDLabel: string(u.GetUID())}))
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		return false, fmt.Errorf("failed to encode %s %s: %w", gk, obj.GetName(), err)
	}
	sum := sha256.Sum256(raw)
	obj.SetAnnotations(labels.Merge(obj.GetAnnotations(), map[string]string{renderedAnnotation: hex.EncodeToString(sum[:16])}))
	if err := controllerutil.SetControllerReference(u, obj, c.Client.Scheme()); err != nil {
		return false, fmt.Errorf("failed to own %s %s: %w", gk, obj.GetName(), err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(obj.GroupVersionKind())
	err = c.Client.Get(ctx, client.ObjectKeyFromObject(obj), got)
	switch {
	case apierrors.IsNotFound(err):
		err = c.Client.Create(ctx, obj, client.FieldOwner(FieldManager))
	case err != nil:
		return false, fmt.Errorf("failed to get %s %s/%s: %w", gk, obj.GetNamespace(), obj.GetName(), err)
	case !metav1.IsControlledBy(got, u):
		markObjectConflict(s.in, gk.String(), obj.GetName())
		return false, nil
	case got.GetAnnotations()[renderedAnnotation] == obj.GetAnnotations()[renderedAnnotation]:
		return true, nil
	default:
		obj.SetResourceVersion(got.GetResourceVersion())
		err = c.Client.Update(ctx, obj, client.FieldOwner(FieldManager))
	}
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		markObjectInvalid(s.in, entry, err)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to write %s %s/%s: %w", gk, obj.GetNamespace(), obj.GetName(), err)
	}
	return true, nil
}

// parameterError is a parameter an object cannot take: the tenant's to fix.
type parameterError struct{ msg string }

func (e *parameterError) Error() string { return e.msg }

// renderObject substitutes the placeholders of a template's object: ${parameters.<path>}
// from the instance's parameters, ${outputs.<name>} from the non-secret outputs published.
// A placeholder that is a whole string takes the value with its type, one within text its
// text; either way only strings, numbers and booleans are substituted, so that no value
// adds structure to the object. It returns the outputs it waits for, not published yet.
func renderObject(o v1alpha1.TemplateObject, params map[string]any, outputs *published) (*unstructured.Unstructured, []string, error) {
	obj, err := stacktemplate.DecodeObject(o)
	if err != nil {
		return nil, nil, err
	}
	var awaits []string
	value := func(p stacktemplate.Placeholder) (any, bool, error) {
		if p.Source == stacktemplate.SourceParameters {
			v, ok := lookup(params, p.Path)
			if !ok {
				return nil, false, &parameterError{fmt.Sprintf("parameter %s is unset", p.Path)}
			}
			if _, ok := scalar(v); !ok {
				return nil, false, &parameterError{fmt.Sprintf("parameter %s must be a string, number or boolean", p.Path)}
			}
			return v, true, nil
		}
		if outputs == nil {
			awaits = append(awaits, p.Path)
			return nil, false, nil
		}
		_, public := outputs.public[p.Path]
		raw, ok := outputs.values[p.Path]
		if !public || !ok {
			awaits = append(awaits, p.Path)
			return nil, false, nil
		}
		var v any
		if err := utiljson.Unmarshal(raw.Raw, &v); err != nil {
			return nil, false, fmt.Errorf("output %s is not JSON", p.Path)
		}
		if _, ok := scalar(v); !ok {
			return nil, false, fmt.Errorf("output %s must be a string, number or boolean", p.Path)
		}
		return v, true, nil
	}
	m, err := stacktemplate.WalkStrings(obj.Object, func(text string) (any, error) {
		ps := stacktemplate.FindPlaceholders(text)
		if len(ps) == 1 && ps[0].Start == 0 && ps[0].End == len(text) {
			v, ok, err := value(ps[0])
			if !ok {
				return text, err
			}
			return v, nil
		}
		var b strings.Builder
		last := 0
		for _, p := range ps {
			b.WriteString(text[last:p.Start])
			last = p.End
			v, ok, err := value(p)
			if err != nil {
				return nil, err
			}
			if ok {
				s, _ := scalar(v)
				b.WriteString(s)
			}
		}
		b.WriteString(text[last:])
		return b.String(), nil
	})
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(awaits)
	return &unstructured.Unstructured{Object: m}, slices.Compact(awaits), nil
}

// deleteObjects deletes the objects the instance owns in its namespace of every kind
// templates may make, found by the labels applyObject sets; those of a kind no longer
// allowed go with the instance, which owns them.
func (c *Controller) deleteObjects(ctx context.Context, s *scope) error {
	u := s.in.obj
	for _, gk := range c.ObjectKinds {
		mapping, err := c.Client.RESTMapper().RESTMapping(gk)
		if apimeta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("failed to map kind %s: %w", gk, err)
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(gk.Kind + "List"))
		if err := c.Client.List(ctx, list, client.InNamespace(u.GetNamespace()), client.MatchingLabels{
			v1alpha1.TemplateLabel: s.template.Name, v1alpha1.InstanceUIDLabel: string(u.GetUID()),
		}); err != nil {
			return fmt.Errorf("failed to list %s of %s/%s: %w", gk, u.GetNamespace(), u.GetName(), err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			if !metav1.IsControlledBy(obj, u) {
				continue
			}
			if err := c.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("failed to delete %s %s/%s: %w", gk, obj.GetNamespace(), obj.GetName(), err)
			}
		}
	}
	return nil
}
