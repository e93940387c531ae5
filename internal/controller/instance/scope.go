package instance

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/kit"
	"github.com/stackwright/stackwright/internal/controller/patch"
)

// scope is what one reconcile of an instance has learned so far. Each phase reads it and
// adds to it; a new feature is a new phase (and, if it must, a new field).
type scope struct {
	req      Request
	template *v1alpha1.StackTemplate
	in       *instance
	patcher  *patch.Patcher
	// name is the instance's Stack's name in the template's platform namespace.
	name string

	// params are the instance's spec.parameters.
	params map[string]any
	// stack is the instance's Stack: as found (without a resourceVersion when there is
	// none yet), then as applied.
	stack *pulumiv1.Stack
	// rev is the template revision the Stack is rendered from, and spec its Stack's spec.
	rev  *v1alpha1.StackTemplateRevision
	spec pulumiv1.StackSpec
	// preview, while a rollout's wave previews its target, is the target revision: the
	// Stack of spec.stack is rendered from it, for that preview only, and everything else
	// from rev. apply holds the Stack's up to its preview's plan (the wave is open).
	preview *loaded
	apply   bool
	// members names the Stacks of the revision's spec.stacks, by entry; composed are
	// those applied, in dependency order, as applied.
	members  map[string]string
	composed []*member
	// rendered is the instance's Stack spec and parameter Secret.
	rendered rendered
	// forward are the approve and reject annotations to forward to the Stack; ignored
	// says why the instance's were not forwarded.
	forward map[string]string
	ignored string
	// outputs is what the instance's Stacks published of their outputs; nil until the
	// Stack of spec.stack has exported any.
	outputs *published

	// The events of the two actions, emitted once the status they announce is written.
	render, observe *kit.Events
	// notices is the controller's memory of warnings announced, and noted what this
	// reconcile adds to it once its events are emitted.
	notices *notices
	noted   []noted
}

func (c *Controller) newScope(ctx context.Context, req Request, t *v1alpha1.StackTemplate, in *instance) (*scope, error) {
	name, err := c.locateStack(ctx, t, in)
	if err != nil {
		return nil, err
	}
	return &scope{
		req: req, template: t, in: in,
		patcher: patch.New(c.Client, in.obj, t.Spec.API.Kind, FieldManager),
		name:    name,
		render:  kit.NewEvents(c.Recorder, eventActionRender),
		observe: kit.NewEvents(c.Recorder, eventActionObserve),
		notices: &c.notices,
	}, nil
}

// locateStack names the instance's Stack: stackName, unless the instance's Stack was made
// under its legacyStackName (by an earlier version), which it then keeps.
func (c *Controller) locateStack(ctx context.Context, t *v1alpha1.StackTemplate, in *instance) (string, error) {
	name := stackName(t.Name, in.obj.GetNamespace(), in.obj.GetName())
	legacy := legacyStackName(t.Name, in.obj.GetNamespace(), in.obj.GetName())
	st := &pulumiv1.Stack{}
	err := c.Client.Get(ctx, client.ObjectKey{Namespace: t.Spec.Namespace, Name: name}, st)
	if !apierrors.IsNotFound(err) {
		if err != nil {
			return "", fmt.Errorf("failed to get Stack %s/%s: %w", t.Spec.Namespace, name, err)
		}
		return name, nil
	}
	switch err := c.Client.Get(ctx, client.ObjectKey{Namespace: t.Spec.Namespace, Name: legacy}, st); {
	case apierrors.IsNotFound(err):
		return name, nil
	case err != nil:
		return "", fmt.Errorf("failed to get Stack %s/%s: %w", t.Spec.Namespace, legacy, err)
	case st.Labels[v1alpha1.InstanceUIDLabel] == string(in.obj.GetUID()):
		return legacy, nil
	}
	return name, nil
}

// writeStatus writes the instance's status, with what the outcome implies.
func (s *scope) writeStatus(ctx context.Context) error {
	finalizeStatus(s.in)
	if err := s.in.store(); err != nil {
		return err
	}
	return s.patcher.Status(ctx, s.in.obj)
}

// flush emits the reconcile's events when the status they announce was written
// (statusErr nil), and only then remembers the warnings among them; otherwise it drops
// both, and the reconcile that runs again decides anew.
func (s *scope) flush(statusErr error) {
	s.render.Flush(statusErr)
	s.observe.Flush(statusErr)
	if statusErr == nil {
		s.notices.record(s.noted...)
	}
	s.noted = nil
}

// warn adds a Warning event about regarding unless state, what it announces, is what was
// last announced for the instance under reason: a warning that no status records would
// otherwise repeat at every reconcile. An empty state announces nothing and makes the next
// state new.
func (s *scope) warn(regarding runtime.Object, reason, state, note string, args ...any) {
	k := noticeKey{instance: s.req, reason: reason}
	if state != "" && s.notices.changed(k, state) {
		s.render.Add(regarding, corev1.EventTypeWarning, reason, note, args...)
	}
	s.noted = append(s.noted, noted{key: k, state: state})
}

// notices remembers the warnings announced per instance and reason. It is the process's
// memory, not the cluster's: a restarted manager announces a standing warning once more.
type notices struct {
	mu   sync.Mutex
	last map[noticeKey]string
}

type noticeKey struct {
	instance Request
	reason   string
}

// noted is a state to remember once announced ("" forgets it).
type noted struct {
	key   noticeKey
	state string
}

// changed reports whether state is not the one last announced for k.
func (n *notices) changed(k noticeKey, state string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.last[k] != state
}

// record remembers what was announced.
func (n *notices) record(list ...noted) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range list {
		switch {
		case x.state == "":
			delete(n.last, x.key)
		case n.last == nil:
			n.last = map[noticeKey]string{x.key: x.state}
		default:
			n.last[x.key] = x.state
		}
	}
}

// forget drops what was announced about an instance that is gone.
func (n *notices) forget(req Request) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k := range n.last {
		if k.instance == req {
			delete(n.last, k)
		}
	}
}
