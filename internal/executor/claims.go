package executor

import (
	"context"
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// ClaimFunc claims an Update for runner: it reports false when the Update is not Pending
// or another claim won, and an error when the API server did not say.
type ClaimFunc func(ctx context.Context, u *v1alpha1.Update, runner string) (bool, error)

// ErrStaleRead is what a ClaimFunc returns when the Update changed since it was read (a
// conflict): nothing was claimed, and the caller reads it again a little later rather than
// dropping it (it may still be Pending: a status write, such as its queue position,
// changed it, or the cache was behind).
var ErrStaleRead = errors.New("the Update changed since it was read")

// errUnsettled is a claim retried before the Update shows what became of the lost one.
var errUnsettled = errors.New("a claim of this Update got no answer, and the Update still reads Pending")

// Claims settles claims whose answer was lost. The API server may apply a claim and go away
// before answering it (a restart, a cut connection): trying again then finds the Update
// Running under this very runner, refused as taken, yet run by nobody, and its runner alive
// (this process), so never declared lost either. Only the claimant whose answer was lost may
// take such an Update as its own; Claims remembers which those are. The zero value is ready.
type Claims struct {
	mu   sync.Mutex
	lost map[types.NamespacedName]bool
}

// Claim claims u, as read (from a cache, maybe), for runner with claim. An error means the
// outcome is unknown yet, and the caller tries again later.
func (c *Claims) Claim(ctx context.Context, u *v1alpha1.Update, runner string, claim ClaimFunc) (bool, error) {
	key := client.ObjectKeyFromObject(u)
	c.mu.Lock()
	lost := c.lost[key]
	c.mu.Unlock()
	pending := u.Status.Phase == "" || u.Status.Phase == v1alpha1.UpdatePhasePending
	if lost && u.Status.Phase == v1alpha1.UpdatePhaseRunning && u.Status.Runner == runner {
		c.set(key, false)
		return true, nil
	}
	claimed, err := claim(ctx, u, runner)
	switch {
	case errors.Is(err, ErrStaleRead):
		return false, err
	case err != nil:
		c.set(key, true)
		return false, err
	case !claimed && lost && pending:
		// A stale read: the lost claim may be what made this one conflict.
		return false, errUnsettled
	default:
		c.set(key, false)
		return claimed, nil
	}
}

// Forget drops what is remembered of key: its Update is gone.
func (c *Claims) Forget(key types.NamespacedName) { c.set(key, false) }

func (c *Claims) set(key types.NamespacedName, lost bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !lost {
		delete(c.lost, key)
		return
	}
	if c.lost == nil {
		c.lost = map[types.NamespacedName]bool{}
	}
	c.lost[key] = true
}
