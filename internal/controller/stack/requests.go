package stack

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/autoupdate"
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/controller/stack/decide"
)

// Events of one-off operations.
const (
	EventRequestSucceeded = "RequestSucceeded"
	EventRequestFailed    = "RequestFailed"
)

// runRequested starts the oldest one-off operation requested of the Stack (an
// auto.pulumi.com Update naming it) before anything the Stack itself would do: someone
// asked for it now, and it may be what unblocks the Stack (a refresh). It runs on the
// artifact and inputs just resolved, so a Stack held by a rollout operates on its pinned
// revision. A recorded Update to resume comes first.
func (r *Reconciler) runRequested(ctx context.Context, s *scope) (bool, error) {
	if !r.Options.OneOffs || s.resume != "" {
		return true, nil
	}
	req, err := r.nextRequest(ctx, s.stack)
	if err != nil || req == nil {
		return err == nil, err
	}
	s.request = req
	s.next = decide.Decision{Action: decide.Run, Attempt: 1, Why: fmt.Sprintf("%s requested by auto.pulumi.com Update %s", req.Spec.Type, req.Name)}
	return r.createUpdate(ctx, s, func(stack *pulumiv1.Stack, u *v1alpha1.Update) {
		// Like a drift check, a requested operation leaves the Stack's conditions and its
		// record of its own updates alone.
		stack.Status.CurrentUpdate = &pulumiv1.CurrentStackUpdate{
			Generation: stack.Generation, Name: u.Name, Commit: u.Spec.Revision, Type: string(u.Spec.Type), Request: req.Name,
		}
	})
}

// nextRequest returns the oldest request naming the Stack that can run and has not run:
// the Update that runs a request is named after its UID, and its existence says it ran
// (a request completed a moment ago may still look pending in the cache).
func (r *Reconciler) nextRequest(ctx context.Context, stack *pulumiv1.Stack) (*autov1alpha1.Update, error) {
	var list autov1alpha1.UpdateList
	if err := r.Client.List(ctx, &list, client.InNamespace(stack.Namespace), client.MatchingFields{IndexRequestWorkspace: stack.Name}); err != nil {
		return nil, fmt.Errorf("failed to list auto.pulumi.com Updates: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b autov1alpha1.Update) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i := range list.Items {
		req := &list.Items[i]
		if autoupdate.Completed(req) || !req.DeletionTimestamp.IsZero() {
			continue
		}
		if reason, _ := autoupdate.Refusal(req, stack); reason != "" {
			// The autoupdate controller says why.
			continue
		}
		u, _, err := r.findUpdate(ctx, stack.Namespace, autoupdate.UpdateName(stack.Name, req))
		if err != nil {
			return nil, err
		}
		if u == nil {
			return req, nil
		}
	}
	return nil, nil
}

// requestUpdate makes u, built for the Stack, the Update that runs s.request: the
// request's operation and options, on the Stack's artifact and current inputs. It carries
// no desired-state key and no decided inputs: nothing the Stack deploys is recorded under
// it, and it runs on the inputs as they are when it starts.
func requestUpdate(u *v1alpha1.Update, s *scope) {
	req := s.request
	u.Name = autoupdate.UpdateName(s.stack.Name, req)
	u.Spec.Type, u.Spec.Options = autoupdate.Operation(req, s.stack)
	u.Spec.DesiredStateKey, u.Spec.Inputs, u.Spec.Attempt = "", nil, 1
	if len(req.Name) <= 63 {
		if u.Labels == nil {
			u.Labels = map[string]string{}
		}
		u.Labels[v1alpha1.RequestLabel] = req.Name
	}
}

// observeRequest follows the Update in flight that runs a requested operation: it marks
// the request running, and once the Update has finished records its result in the
// request, before the Update may be pruned from the history, and only then forgets it.
// One recorded but never created is forgotten: its request is still pending, and the
// same Update is created again.
func (r *Reconciler) observeRequest(ctx context.Context, s *scope, u *v1alpha1.Update, detached bool) (bool, error) {
	stack := s.stack
	if u == nil {
		stack.Status.CurrentUpdate = nil
		return true, nil
	}
	req, err := r.requestOf(ctx, stack, u)
	if err != nil {
		return false, err
	}
	if !u.Status.Finished() {
		// Once, and again when the runner has reported its start time.
		if req != nil && (req.Status.Update != u.Name || req.Status.StartTime.IsZero() && u.Status.StartTime != nil) {
			if err := r.writeRequest(ctx, req, func(req *autov1alpha1.Update) { autoupdate.MarkRunning(req, u) }); err != nil {
				return false, err
			}
		}
		if detached {
			s.requeueAfter(detachedPoll)
		}
		return false, nil
	}
	if req != nil && !autoupdate.Completed(req) {
		if err := r.writeRequest(ctx, req, func(req *autov1alpha1.Update) { autoupdate.MarkFinished(req, u, r.Now()) }); err != nil {
			return false, err
		}
	}
	name := stack.Status.CurrentUpdate.Request
	if u.Status.Phase == v1alpha1.UpdatePhaseSucceeded {
		s.eventAbout(u, corev1.EventTypeNormal, EventRequestSucceeded, "%s requested by auto.pulumi.com Update %s succeeded (Update %s): %s", u.Spec.Type, name, u.Name, u.Status.Message)
	} else {
		s.eventAbout(u, corev1.EventTypeWarning, EventRequestFailed, "%s requested by auto.pulumi.com Update %s failed (Update %s): %s", u.Spec.Type, name, u.Name, u.Status.Message)
	}
	stack.Status.CurrentUpdate = nil
	r.prune(ctx, s)
	return true, nil
}

// requestOf returns the request the Stack's update in flight runs, nil if it is gone (or
// was replaced by another of the same name, whose Update this is not).
func (r *Reconciler) requestOf(ctx context.Context, stack *pulumiv1.Stack, u *v1alpha1.Update) (*autov1alpha1.Update, error) {
	req := &autov1alpha1.Update{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: stack.Status.CurrentUpdate.Request}, req)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get auto.pulumi.com Update %s: %w", stack.Status.CurrentUpdate.Request, err)
	case autoupdate.UpdateName(stack.Name, req) != u.Name:
		return nil, nil
	}
	return req, nil
}

// writeRequest applies mark to req's status, with an optimistic lock: the request was
// read from the API server, and a conflict is retried with a fresh read.
func (r *Reconciler) writeRequest(ctx context.Context, req *autov1alpha1.Update, mark func(*autov1alpha1.Update)) error {
	p := patch.New(r.Client, req, "Update", autoupdate.FieldManager)
	mark(req)
	err := p.Status(ctx, req, patch.WithOptimisticLock())
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
