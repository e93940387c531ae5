package kit

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// Phase is one step of a reconcile over scope S. It returns false when the reconcile ends
// with it: the object's conditions then say why, and the scope when to look again.
type Phase[S any] func(ctx context.Context, s S) (proceed bool, err error)

// Run runs phases in order until one ends the reconcile or fails.
func Run[S any](ctx context.Context, s S, phases ...Phase[S]) error {
	for _, p := range phases {
		proceed, err := p(ctx, s)
		if err != nil || !proceed {
			return err
		}
	}
	return nil
}

// Requeue is the result a reconcile builds up: the earliest of the times its phases asked
// to look again.
type Requeue struct{ after time.Duration }

// After asks to look again within d; the earliest request wins, and d <= 0 asks nothing.
func (q *Requeue) After(d time.Duration) {
	if d > 0 && (q.after <= 0 || d < q.after) {
		q.after = d
	}
}

// Result is the ctrl.Result for the requests made so far.
func (q *Requeue) Result() ctrl.Result { return ctrl.Result{RequeueAfter: q.after} }
