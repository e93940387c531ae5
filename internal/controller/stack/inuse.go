package stack

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/inputs"
)

// EventInUse is the event of a deleted Stack held for the Stacks that read its outputs.
const EventInUse = "InUse"

// inUseRecheck is how often a Stack held for its consumers looks again: no watch maps a
// consumer's deletion back to the Stacks it read from.
const inUseRecheck = 10 * time.Second

// holdWhileInUse keeps a deleted Stack, and so its resources and the outputs it
// publishes, until no other Stack reads those outputs (spec.stackwright.outputs'
// Secret or ConfigMap, as envRefs, secretsRef, envs, envSecrets or configRef): a
// consumer's destroy may need them, and its next update would fail without them. Stacks
// deleted together (a namespace's) are so torn down in reverse order of their wiring.
func (r *Reconciler) holdWhileInUse(ctx context.Context, s *scope) (bool, error) {
	consumers, what, err := r.consumers(ctx, s.stack)
	if err != nil || len(consumers) == 0 {
		return err == nil, err
	}
	msg := fmt.Sprintf("Stack(s) %s read the outputs it publishes (%s): it is destroyed and released once they are gone", strings.Join(consumers, ", "), what)
	if c := conditions.Get(s.stack, pulumiv1.ConditionReconciling); c == nil || c.Reason != pulumiv1.ReasonInUse {
		s.event(corev1.EventTypeNormal, EventInUse, "%s", msg)
	}
	markReconciling(s.stack, pulumiv1.ReasonInUse, msg)
	s.requeueAfter(inUseRecheck)
	return false, nil
}

// consumers lists the other Stacks of stack's namespace that read the Secret or ConfigMap
// stack publishes its outputs to, and names that object.
func (r *Reconciler) consumers(ctx context.Context, stack *pulumiv1.Stack) ([]string, string, error) {
	e := stack.Spec.OutputsExport()
	if e == nil {
		return nil, "", nil
	}
	var names, what []string
	for _, ref := range []struct {
		index, name, kind string
		read              func(*pulumiv1.Stack) []string
	}{
		{IndexSecretRefs, e.SecretName, "Secret", func(st *pulumiv1.Stack) []string { secrets, _ := inputs.References(st); return secrets }},
		{IndexConfigMapRefs, e.ConfigMapName, "ConfigMap", func(st *pulumiv1.Stack) []string { _, cms := inputs.References(st); return cms }},
	} {
		if ref.name == "" {
			continue
		}
		var list pulumiv1.StackList
		if err := r.Client.List(ctx, &list, client.InNamespace(stack.Namespace), client.MatchingFields{ref.index: ref.name}); err != nil {
			return nil, "", fmt.Errorf("failed to list Stacks reading %s %s: %w", ref.kind, ref.name, err)
		}
		found := false
		for i := range list.Items {
			st := &list.Items[i]
			// The index also lists the Stacks that publish to the object: only readers count.
			if st.UID != stack.UID && slices.Contains(ref.read(st), ref.name) {
				names, found = append(names, st.Name), true
			}
		}
		if found {
			what = append(what, ref.kind+" "+ref.name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), strings.Join(what, ", "), nil
}
