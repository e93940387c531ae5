package instance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/stacktemplate"
)

// member is a Stack of an entry of a composed template's spec.stacks, as this reconcile
// applied it.
type member struct {
	entry v1alpha1.TemplateStack
	stack *pulumiv1.Stack
	// outputs is what the Stack published; nil until it has.
	outputs *published
}

// composeStacks brings the Stacks of the revision's spec.stacks to their rendering, in
// dependency order: each is created or re-rendered only once the entries it depends on are
// Ready at the instance's generation and have published the outputs its config reads, so
// that its first run finds them. The Stack of spec.stack depends on every entry: until all
// are Ready the reconcile ends here, the instance saying which waits for what.
func (c *Controller) composeStacks(ctx context.Context, s *scope) (bool, error) {
	t, u := s.template, s.in.obj
	s.members = map[string]string{}
	if len(s.rev.Spec.Stacks) == 0 {
		return true, nil
	}
	order, err := stacktemplate.StackOrder(s.rev.Spec.Stacks)
	if err != nil {
		markRevisionInvalid(s.in, s.rev.Name, err)
		return false, nil
	}
	s.in.status.TemplateRevision = s.rev.Spec.Revision
	ready := map[string]*member{}
	var waiting []string
	for _, e := range order {
		name := memberStackName(t.Name, e.Name, u.GetNamespace(), u.GetName())
		s.members[e.Name] = name
		if why := awaited(e.DependsOn, e.Config, ready); len(why) > 0 {
			waiting = append(waiting, fmt.Sprintf("%s waits for %s", e.Name, strings.Join(why, ", ")))
			continue
		}
		st, ok, err := c.findOwnStack(ctx, s, name)
		if !ok || err != nil {
			return false, err
		}
		spec, err := stacktemplate.DecodeStack(e.Stack, "spec.stacks["+e.Name+"].stack")
		if err != nil {
			markRevisionInvalid(s.in, s.rev.Name, err)
			return false, nil
		}
		producers := map[string]string{}
		for _, d := range stacktemplate.Dependencies(e.DependsOn, e.Config) {
			producers[d] = s.members[d]
		}
		r, err := render(spec, e.Config, producers, u.GetNamespace(), u.GetName(), name, s.params)
		if err != nil {
			markParametersInvalid(s.in, fmt.Errorf("spec.stacks[%s]: %w", e.Name, err))
			return false, nil
		}
		if err := c.applyParameterSecret(ctx, t, u, name, r.secrets); err != nil {
			return false, err
		}
		if st, err = c.applyRendered(ctx, s, st, r, e.Name, nil); err != nil {
			return false, err
		}
		m := &member{entry: e, stack: st}
		s.composed = append(s.composed, m)
		switch cond := stalledAt(s.in, st); {
		case cond != nil:
			conditions.MarkStalled(s.in, cond.Reason, stackMessage(st, s.template.Spec.InstanceMessages, "stalled", cond.Reason, cond.Message))
			return false, nil
		case !readyAt(s.in, st):
			waiting = append(waiting, fmt.Sprintf("Stack %s/%s of %s is not Ready yet", st.Namespace, st.Name, e.Name))
			continue
		}
		all, public, err := c.exported(ctx, st)
		if err != nil {
			return false, err
		}
		if all != nil {
			m.outputs = &published{values: st.Status.Outputs, all: all, public: public}
		}
		ready[e.Name] = m
	}
	if len(waiting) == 0 {
		if why := awaited(slices.Collect(maps.Keys(ready)), s.rev.Spec.Config, ready); len(why) > 0 {
			waiting = append(waiting, "the Stack of spec.stack waits for "+strings.Join(why, ", "))
		}
	}
	if len(waiting) > 0 {
		markAwaitingDependencies(s.in, waiting)
		return false, nil
	}
	return true, nil
}

// memberNames names the instance u's Stacks of the entries of revision rev's spec.stacks,
// by entry.
func memberNames(t *v1alpha1.StackTemplate, rev *v1alpha1.StackTemplateRevision, u client.Object) map[string]string {
	out := make(map[string]string, len(rev.Spec.Stacks))
	for _, e := range rev.Spec.Stacks {
		out[e.Name] = memberStackName(t.Name, e.Name, u.GetNamespace(), u.GetName())
	}
	return out
}

// awaited says what of the entries a Stack depends on (dependsOn, and those whose outputs
// its config reads) keeps it from being rendered: an entry not Ready, or an output its
// config reads that the entry has not published where the key reads it (a secret output
// reaches only a secret key).
func awaited(dependsOn []string, config []v1alpha1.TemplateConfig, ready map[string]*member) []string {
	var why []string
	for _, d := range stacktemplate.Dependencies(dependsOn, config) {
		if ready[d] == nil {
			why = append(why, d)
		}
	}
	if len(why) > 0 {
		return why
	}
	for _, c := range config {
		o := c.StackOutput
		if o == nil {
			continue
		}
		var inSecret, inConfigMap bool
		if out := ready[o.Stack].outputs; out != nil {
			_, inSecret = out.all[o.Output]
			_, inConfigMap = out.public[o.Output]
		}
		switch {
		case !inSecret:
			why = append(why, fmt.Sprintf("output %s of %s (not published)", o.Output, o.Stack))
		case !c.Secret && !inConfigMap:
			why = append(why, fmt.Sprintf("output %s of %s (secret: only a secret config key may read it)", o.Output, o.Stack))
		}
	}
	return why
}

// findOwnStack reads the instance's Stack name, a new one (no resourceVersion) when there
// is none. One that is not this instance's stalls it; one of an earlier instance of the
// name is waited for, as it goes first.
func (c *Controller) findOwnStack(ctx context.Context, s *scope, name string) (*pulumiv1.Stack, bool, error) {
	ns := s.template.Spec.Namespace
	st := &pulumiv1.Stack{}
	err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, st)
	switch {
	case apierrors.IsNotFound(err):
		return &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("failed to get Stack %s/%s: %w", ns, name, err)
	case st.Labels[v1alpha1.TemplateLabel] != s.template.Name:
		markStackConflict(s.in, st)
		return nil, false, nil
	case st.Labels[v1alpha1.InstanceUIDLabel] != string(s.in.obj.GetUID()) || !st.DeletionTimestamp.IsZero():
		markEarlierStackDeleting(s.in, st)
		return nil, false, nil
	}
	return st, true, nil
}

// pruneStacks deletes the instance's Stacks of entries its revision no longer has, once no
// other Stack of the instance depends on them.
func (c *Controller) pruneStacks(ctx context.Context, s *scope) (bool, error) {
	stacks, err := c.instanceStacks(ctx, s)
	if err != nil {
		return false, err
	}
	keep := func(st *pulumiv1.Stack) bool {
		e := st.Labels[v1alpha1.TemplateStackLabel]
		return e == "" || slices.ContainsFunc(s.rev.Spec.Stacks, func(x v1alpha1.TemplateStack) bool { return x.Name == e })
	}
	// A protected Stack stays, and says so itself: the instance is not being deleted.
	_, err = c.deleteUnneeded(ctx, stacks, keep)
	return err == nil, err
}

// instanceStacks lists the instance's Stacks in the platform namespace: spec.stack's and
// those of spec.stacks.
func (c *Controller) instanceStacks(ctx context.Context, s *scope) ([]*pulumiv1.Stack, error) {
	var list pulumiv1.StackList
	if err := c.Client.List(ctx, &list, client.InNamespace(s.template.Spec.Namespace), client.MatchingLabels{
		v1alpha1.TemplateLabel: s.template.Name, v1alpha1.InstanceUIDLabel: string(s.in.obj.GetUID()),
	}); err != nil {
		return nil, fmt.Errorf("failed to list Stacks of %s %s/%s: %w", s.in.obj.GetKind(), s.in.obj.GetNamespace(), s.in.obj.GetName(), err)
	}
	out := make([]*pulumiv1.Stack, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// deleteUnneeded deletes each of stacks that keep refuses and no other of stacks lists as
// a prerequisite (the Stacks of spec.stacks are their consumers' prerequisites, so
// consumers go first), marking it as being deleted. It returns a Stack the platform team
// protects from deletion, which the API server refused to delete.
func (c *Controller) deleteUnneeded(ctx context.Context, stacks []*pulumiv1.Stack, keep func(*pulumiv1.Stack) bool) (*pulumiv1.Stack, error) {
	needed := map[string]bool{}
	for _, st := range stacks {
		for _, p := range st.Spec.Prerequisites {
			needed[p.Name] = true
		}
	}
	var protected *pulumiv1.Stack
	for _, st := range stacks {
		if keep(st) || needed[st.Name] || !st.DeletionTimestamp.IsZero() {
			continue
		}
		err := c.Client.Delete(ctx, st, client.Preconditions{UID: &st.UID})
		switch {
		case apierrors.IsForbidden(err) && st.Annotations[pulumiv1.ProtectedAnnotation] == "true":
			protected = st
		case client.IgnoreNotFound(err) != nil:
			return nil, fmt.Errorf("failed to delete Stack %s/%s: %w", st.Namespace, st.Name, err)
		default:
			now := metav1.Now()
			st.DeletionTimestamp = &now
		}
	}
	return protected, nil
}
