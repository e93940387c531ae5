package instance

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// observeOutputs reads what the instance's Stacks published of their outputs, and shows in
// the instance's status the non-secret ones the template revision lists and the typed status
// fields the template declares; an instance whose Stack is Ready waits for the fields the
// template's readyWhen names. Its status is right before publish writes to the tenant's
// namespace, and whether or not that succeeds.
func (c *Controller) observeOutputs(ctx context.Context, s *scope) (bool, error) {
	in, st, t := s.in, s.stack, s.template
	all, public, err := c.exported(ctx, st)
	if err != nil {
		return false, err
	}
	var gaps []fieldGap
	if all == nil {
		// Nothing exported (yet, or deleted by hand): the status keeps what it showed, and
		// the gaps say that the others' outputs are not published.
		in.status.Fields = retainFields(in.status.Fields, t.Spec.StatusFields)
		_, gaps = statusFields(t.Spec.StatusFields, t.PublishedOutputs(), published{})
	} else {
		s.outputs = withMembers(&published{values: st.Status.Outputs, all: all, public: public}, s.composed)
		in.status.Outputs = publicOutputs(*s.outputs, s.rev.Spec.PublishedOutputs())
		in.status.Fields, gaps = statusFields(t.Spec.StatusFields, t.PublishedOutputs(), *s.outputs)
		var warn []string
		for _, g := range gaps {
			if g.warn {
				warn = append(warn, g.String())
			}
		}
		// Once per change of what is wrong: the platform team fixes it, not the tenant.
		s.warn(in.obj, EventStatusFieldUnset, strings.Join(warn, ", "), "Status fields left unset: %s", strings.Join(warn, ", "))
	}
	if unset := unsetForReady(t.Spec.ReadyWhen, in.status.Fields, gaps); len(unset) > 0 && conditions.IsTrue(in, pulumiv1.ConditionReady) {
		markAwaitingStatusFields(in, unset)
	}
	return true, nil
}

// withMembers adds to p, what the Stack of spec.stack published, the outputs the Stacks of
// spec.stacks publish to the instance: each entry's listed ones only, so that an output
// an entry does not list never stands for one of that name the instance receives.
func withMembers(p *published, members []*member) *published {
	if len(members) == 0 {
		return p
	}
	p = &published{values: cloneMap(p.values), all: cloneMap(p.all), public: cloneMap(p.public)}
	for _, m := range members {
		if m.outputs == nil {
			continue
		}
		for _, o := range m.entry.Outputs {
			copyKey(p.values, m.outputs.values, o)
			copyKey(p.all, m.outputs.all, o)
			copyKey(p.public, m.outputs.public, o)
		}
	}
	return p
}

// cloneMap is a copy of m, never nil.
func cloneMap[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	maps.Copy(out, m)
	return out
}

// copyKey sets dst[k] to src[k], or deletes it when src has none.
func copyKey[V any](dst, src map[string]V, k string) {
	if v, ok := src[k]; ok {
		dst[k] = v
	} else {
		delete(dst, k)
	}
}

// publish copies the outputs the template revision lists from the Stacks' exported objects
// in the platform namespace to the instance's namespace: every listed one into the Secret
// the instance names, the non-secret ones into its ConfigMap. Outputs the template does not
// list never leave the platform namespace.
func (c *Controller) publish(ctx context.Context, s *scope) (bool, error) {
	if s.outputs == nil {
		return true, nil
	}
	in, outputs, all, public := s.in, s.rev.Spec.PublishedOutputs(), s.outputs.all, s.outputs.public
	sel := map[string][]byte{}
	pub := map[string]string{}
	for _, k := range outputs {
		if v, ok := all[k]; ok {
			sel[k] = v
		}
		if v, ok := public[k]; ok {
			pub[k] = v
		}
	}
	if ref := in.spec.WriteConnectionSecretToRef; ref != nil {
		sec := &corev1.Secret{}
		sec.Namespace, sec.Name = in.obj.GetNamespace(), ref.Name
		if err := c.writeOwned(ctx, in, "Secret", sec, func() { sec.Type = corev1.SecretTypeOpaque; sec.Data = sel }, func() bool {
			return maps.EqualFunc(sec.Data, sel, func(a, b []byte) bool { return string(a) == string(b) })
		}); err != nil {
			return false, err
		}
	}
	if ref := in.spec.WriteOutputsToConfigMapRef; ref != nil {
		cm := &corev1.ConfigMap{}
		cm.Namespace, cm.Name = in.obj.GetNamespace(), ref.Name
		if err := c.writeOwned(ctx, in, "ConfigMap", cm, func() { cm.Data = pub }, func() bool { return maps.Equal(cm.Data, pub) }); err != nil {
			return false, err
		}
	}
	return true, nil
}

// exported reads the Stack's outputs as its controller published them in the platform
// namespace: all of them (the Secret) and the non-secret ones (the ConfigMap). Nil until
// the Stack has published any.
func (c *Controller) exported(ctx context.Context, st *pulumiv1.Stack) (map[string][]byte, map[string]string, error) {
	key := client.ObjectKey{Namespace: st.Namespace, Name: outputsName(st.Name)}
	sec := &corev1.Secret{}
	if err := c.Client.Get(ctx, key, sec); err != nil {
		return nil, nil, client.IgnoreNotFound(err)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Client.Get(ctx, key, cm); err != nil {
		return nil, nil, client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(sec, st) || !metav1.IsControlledBy(cm, st) {
		return nil, nil, nil
	}
	return sec.Data, cm.Data, nil
}

// writeOwned creates obj (set by fill), owned by the instance, or brings the one the
// instance owns to it; one the instance does not own is never taken over.
func (c *Controller) writeOwned(ctx context.Context, in *instance, kind string, obj client.Object, fill func(), same func() bool) error {
	key := client.ObjectKeyFromObject(obj)
	err := c.Client.Get(ctx, key, obj)
	switch {
	case apierrors.IsNotFound(err):
		fill()
		if err := controllerutil.SetControllerReference(in.obj, obj, c.Client.Scheme()); err != nil {
			return fmt.Errorf("failed to own %s %s: %w", kind, key, err)
		}
		if err := c.Client.Create(ctx, obj, client.FieldOwner(FieldManager)); err != nil {
			return fmt.Errorf("failed to create %s %s: %w", kind, key, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("failed to get %s %s: %w", kind, key, err)
	case !metav1.IsControlledBy(obj, in.obj):
		markOutputsConflict(in, kind, key.Name)
		return nil
	case same():
		return nil
	}
	fill()
	if err := c.Client.Update(ctx, obj, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("failed to update %s %s: %w", kind, key, err)
	}
	return nil
}
