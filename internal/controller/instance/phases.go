package instance

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/stacktemplate"
	"github.com/stackwright/stackwright/internal/conversion"
)

// The phases of a reconcile, in the order they run. Each either proceeds or ends the
// reconcile with the instance's conditions saying why.

// checkTemplate waits while the template does not serve: the instance's Stack stays as it
// is, rather than follow a template that is being fixed or removed.
func (c *Controller) checkTemplate(_ context.Context, s *scope) (bool, error) {
	if t := s.template; !conditions.IsTrue(t, pulumiv1.ConditionReady) || !t.DeletionTimestamp.IsZero() {
		markTemplateNotServing(s.in, t.Name)
		return false, nil
	}
	return true, nil
}

// checkNamespace stalls an instance in a namespace the template's namespaceSelector does
// not select.
func (c *Controller) checkNamespace(ctx context.Context, s *scope) (bool, error) {
	ok, err := c.namespaceAllowed(ctx, s.template, s.in.obj.GetNamespace())
	if err != nil {
		return false, err
	}
	if !ok {
		markNamespaceNotAllowed(s.in, s.template.Name)
		return false, nil
	}
	return true, nil
}

// namespaceAllowed reports whether the template's namespaceSelector selects namespace.
func (c *Controller) namespaceAllowed(ctx context.Context, t *v1alpha1.StackTemplate, namespace string) (bool, error) {
	if t.Spec.NamespaceSelector == nil {
		return true, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(t.Spec.NamespaceSelector)
	if err != nil {
		// The API server validated the selector's shape; an operator it cannot parse
		// selects nothing rather than everything.
		return false, nil //nolint:nilerr // an unparsable selector is an answer, not a failure
	}
	ns := &corev1.Namespace{}
	if err := c.APIReader.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return false, fmt.Errorf("failed to get namespace %s: %w", namespace, err)
	}
	return sel.Matches(labels.Set(ns.Labels)), nil
}

// readParameters stalls an instance whose spec.parameters is not an object.
func (c *Controller) readParameters(_ context.Context, s *scope) (bool, error) {
	params, err := s.in.parameters()
	if err != nil {
		markParametersInvalid(s.in, err)
		return false, nil
	}
	s.params = params
	return true, nil
}

// findStack reads the instance's Stack of spec.stack (see findOwnStack).
func (c *Controller) findStack(ctx context.Context, s *scope) (bool, error) {
	st, ok, err := c.findOwnStack(ctx, s, s.name)
	if !ok || err != nil {
		return false, err
	}
	s.stack = st
	return true, nil
}

// chooseRevision gets the template revision the Stack is to be rendered from (see
// chooseTemplateRevision), and converts the parameters to the version it names them in; the
// instance waits while it does not exist, and is Stalled by one whose Stack spec cannot be
// read or whose version the kind no longer has, or when rollouts conflict over it. While a
// rollout's wave previews its target, the target revision is got too: the Stack of
// spec.stack is rendered from it, for the preview only.
func (c *Controller) chooseRevision(ctx context.Context, s *scope) (bool, error) {
	choice, note, conflict, err := c.chooseTemplateRevision(ctx, s.template, s.stack, stackLabels(s.template, s.in.obj, s.stack))
	if err != nil {
		return false, err
	}
	if len(conflict) > 0 {
		markRolloutConflict(s.in, conflict)
		return false, nil
	}
	s.warn(s.stack, EventRevisionNotOpened, note, "%s", note)
	held, ok, err := c.loadRevision(ctx, s, choice.rev)
	if !ok || err != nil {
		return false, err
	}
	s.rev, s.spec, s.params = held.rev, held.spec, held.params
	s.apply = choice.apply
	if choice.preview > 0 {
		p, ok, err := c.loadRevision(ctx, s, choice.preview)
		if !ok || err != nil {
			return false, err
		}
		s.preview = &p
	}
	return true, nil
}

// loaded is a template revision with its Stack spec and the instance's parameters in the
// version it names them in.
type loaded struct {
	rev    *v1alpha1.StackTemplateRevision
	spec   pulumiv1.StackSpec
	params map[string]any
}

// loadRevision gets the template revision target and reads it for the instance; ok is false
// when it does not exist (the instance waits) or cannot be read (the instance is Stalled),
// its conditions then saying so.
func (c *Controller) loadRevision(ctx context.Context, s *scope, target int64) (loaded, bool, error) {
	rev, err := c.revision(ctx, s.template, target)
	if err != nil {
		return loaded{}, false, err
	}
	if rev == nil {
		markRevisionMissing(s.in, s.template, target)
		return loaded{}, false, nil
	}
	spec, err := stacktemplate.DecodeStack(rev.Spec.Stack, "spec.stack")
	if err != nil {
		markRevisionInvalid(s.in, rev.Name, err)
		return loaded{}, false, nil
	}
	params := s.params
	if v := rev.Spec.ParametersVersion; v != "" {
		// The revision names parameters as its own version did: a Stack held at it, or one
		// rendered before the template's new revision exists, renders what it rendered.
		if params, err = conversion.Parameters(s.params, s.template.KindVersions(), s.template.StorageVersion(), v); err != nil {
			markRevisionInvalid(s.in, rev.Name, err)
			return loaded{}, false, nil
		}
	}
	return loaded{rev: rev, spec: spec, params: params}, true, nil
}

// stackLabels are the labels the instance u's Stack st carries (but the revision's): its
// own, and those that tie it to the template and the instance.
func stackLabels(t *v1alpha1.StackTemplate, u client.Object, st *pulumiv1.Stack) map[string]string {
	return labels.Merge(st.Labels, map[string]string{
		v1alpha1.TemplateLabel: t.Name, v1alpha1.InstanceNamespaceLabel: u.GetNamespace(), v1alpha1.InstanceUIDLabel: string(u.GetUID()),
	})
}

// renderStack renders the instance's Stack spec and parameter Secret from the revision and
// the parameters; parameters the revision's config cannot take stall the instance. While
// the Stack previews a rollout's target, it is rendered from that revision, against the
// instance's Stacks of spec.stacks as they are (they keep the revision the instance has
// until the wave opens; the Stack controller holds the preview while one the target adds
// does not exist).
func (c *Controller) renderStack(_ context.Context, s *scope) (bool, error) {
	u := s.in.obj
	rev, spec, params, members := s.rev, s.spec, s.params, s.members
	if p := s.preview; p != nil {
		rev, spec, params, members = p.rev, p.spec, p.params, memberNames(s.template, p.rev, u)
	}
	r, err := render(spec, rev.Spec.Config, members, u.GetNamespace(), u.GetName(), s.name, params)
	if err != nil {
		markParametersInvalid(s.in, err)
		return false, nil
	}
	s.rendered = r
	return true, nil
}

// checkApprovals decides which of the instance's approve and reject annotations its Stack
// is to carry, and warns once of those it ignores.
func (c *Controller) checkApprovals(ctx context.Context, s *scope) (bool, error) {
	forward, ignored, err := c.approvals(ctx, s.template, s.in.obj, s.stack)
	if err != nil {
		return false, err
	}
	state := ""
	if ignored != "" {
		// Another approval set on the instance is news even when ignored for the same reason.
		a := s.in.obj.GetAnnotations()
		state = ignored + "\n" + a[pulumiv1.ApproveAnnotation] + "\n" + a[pulumiv1.RejectAnnotation]
	}
	s.warn(s.in.obj, EventApprovalIgnored, state, "The approve and reject annotations are ignored: %s", ignored)
	s.forward, s.ignored = forward, ignored
	return true, nil
}

// applyParameters keeps the parameter Secret the rendered Stack refers to.
func (c *Controller) applyParameters(ctx context.Context, s *scope) (bool, error) {
	if err := c.applyParameterSecret(ctx, s.template, s.in.obj, s.name, s.rendered.secrets); err != nil {
		return false, err
	}
	return true, nil
}

// applyStack creates the instance's Stack from the rendering, or brings the one it has to
// it.
func (c *Controller) applyStack(ctx context.Context, s *scope) (bool, error) {
	st, err := c.applyRendered(ctx, s, s.stack, s.rendered, "", s.forward)
	if err != nil {
		return false, err
	}
	s.stack = st
	return true, nil
}

// applyRendered creates the Stack st (without a resourceVersion: none yet) of the entry of
// the template's spec.stacks ("" for spec.stack) from its rendering r, or brings it to it,
// with the extra annotations; it returns the Stack as applied. The Stack of spec.stack also
// carries what a rollout's preview gate asks of it (RolloutPreviewAnnotation), in the same
// write as the spec it speaks of.
func (c *Controller) applyRendered(ctx context.Context, s *scope, st *pulumiv1.Stack, r rendered, entry string, extra map[string]string) (*pulumiv1.Stack, error) {
	t, u := s.template, s.in.obj
	rev := s.rev.Spec.Revision
	if entry == "" && s.preview != nil {
		rev = s.preview.rev.Spec.Revision
	}
	want := st.DeepCopy()
	want.Labels = labels.Merge(stackLabels(t, u, st), map[string]string{
		v1alpha1.TemplateRevisionLabel: strconv.FormatInt(rev, 10),
	})
	if entry != "" {
		want.Labels[v1alpha1.TemplateStackLabel] = entry
	}
	want.Annotations = labels.Merge(want.Annotations, map[string]string{
		v1alpha1.InstanceAnnotation:  u.GetNamespace() + "/" + u.GetName(),
		instanceGenerationAnnotation: strconv.FormatInt(u.GetGeneration(), 10),
	})
	delete(want.Annotations, v1alpha1.RolloutPreviewAnnotation)
	delete(want.Annotations, v1alpha1.TemplateRevisionHeldAnnotation)
	switch {
	case entry != "":
	case s.preview != nil:
		want.Annotations[v1alpha1.RolloutPreviewAnnotation] = v1alpha1.RolloutPreviewOnly
		want.Annotations[v1alpha1.TemplateRevisionHeldAnnotation] = strconv.FormatInt(s.rev.Spec.Revision, 10)
	case s.apply:
		want.Annotations[v1alpha1.RolloutPreviewAnnotation] = v1alpha1.RolloutPreviewApply
	}
	maps.Copy(want.Annotations, extra)
	want.Spec = r.spec
	switch {
	case st.ResourceVersion == "":
		if err := c.Client.Create(ctx, want, client.FieldOwner(FieldManager)); err != nil {
			return nil, fmt.Errorf("failed to create Stack %s/%s: %w", want.Namespace, want.Name, err)
		}
		s.render.Add(u, corev1.EventTypeNormal, EventStackCreated, "Created Stack %s/%s from revision %d of StackTemplate %s", want.Namespace, want.Name, rev, t.Name)
	case !apiequality.Semantic.DeepEqual(st.Spec, want.Spec) || !maps.Equal(st.Labels, want.Labels) || !maps.Equal(st.Annotations, want.Annotations):
		if err := c.Client.Update(ctx, want, client.FieldOwner(FieldManager)); err != nil {
			return nil, fmt.Errorf("failed to update Stack %s/%s: %w", want.Namespace, want.Name, err)
		}
	}
	return want, nil
}

// observeStack mirrors the Stack into the instance's status, says who approves a change
// that awaits approval, and announces a new last operation.
func (c *Controller) observeStack(ctx context.Context, s *scope) (bool, error) {
	t := s.template
	before := s.in.status.LastUpdate.DeepCopy()
	mirror(s.in, s.stack, t.Spec.InstanceMessages)
	if a := s.in.status.Approval; a != nil && a.State == string(pulumiv1.ApprovalAwaiting) {
		ignored := s.ignored
		if ignored == "" && t.Spec.Approvers != nil {
			var err error
			if ignored, err = c.approvalPolicyMissing(ctx); err != nil {
				return false, err
			}
		}
		markAwaitingApproval(s.in, t, s.stack, ignored)
	}
	if after := s.in.status.LastUpdate; updateChanged(before, after) {
		typ, reason := updateEvent(after)
		s.observe.Add(s.in.obj, typ, reason, "%s %s: %s", after.Type, after.State, after.Message)
	}
	return true, nil
}
