package gc

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/crashpoint"
	"github.com/stackwright/stackwright/internal/source/git"
)

// Artifacts collects the artifact store every Interval. It runs on the leader only: the
// leader's store is the one its resolvers fill and its runners read.
type Artifacts struct {
	Client client.Reader
	Store  *artifact.Store
	// Interval is the time between collections.
	Interval time.Duration
	// Retention is how long an artifact nothing names is kept after its last use. It
	// covers the time between a resolver returning a digest and the Stack recording it.
	Retention time.Duration
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (a *Artifacts) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable: it collects until ctx is done.
func (a *Artifacts) Start(ctx context.Context) error {
	return every(ctx, a.Interval, "artifact-gc", a.Collect)
}

// Collect removes the artifacts nothing names and nobody used within Retention.
func (a *Artifacts) Collect(ctx context.Context) error {
	live, err := a.live(ctx)
	if err != nil {
		return err
	}
	removed, freed, err := a.Store.Collect(func(d string) bool { return live[d] }, a.Retention)
	if removed > 0 {
		crashpoint.Hit(crashpoint.ArtifactsCollected)
		ctrl.LoggerFrom(ctx).Info("Removed unused artifacts", "removed", removed, "freedBytes", freed, "kept", len(live))
	}
	return err
}

// live returns the digests an object names: a Stack's last deployed artifact (destroy on
// deletion and drift checks run on it), a Program's current artifact (Stacks resolve to
// it), a StackRollout's stable, target and aborted revisions (Stacks are held at them),
// and an unfinished Update's (its runner is about to fetch it). A finished Update
// never runs again, so its artifact is not needed for it.
//
// The lists are the cache's own objects, not copies (read only here): at 10,000 Stacks the
// copies of every Stack, Program and Update were tens of megabytes per collection.
func (a *Artifacts) live(ctx context.Context) (map[string]bool, error) {
	live := map[string]bool{}
	var stacks pulumiv1.StackList
	if err := a.Client.List(ctx, &stacks, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("failed to list Stacks: %w", err)
	}
	for _, s := range stacks.Items {
		if sw := s.Status.Stackwright; sw != nil && sw.LastArtifact != nil {
			live[sw.LastArtifact.Digest] = true
		}
	}
	var programs pulumiv1.ProgramList
	if err := a.Client.List(ctx, &programs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("failed to list Programs: %w", err)
	}
	for _, p := range programs.Items {
		if p.Status.Artifact != nil {
			live[p.Status.Artifact.Digest] = true
		}
	}
	var rollouts v1alpha1.StackRolloutList
	if err := a.Client.List(ctx, &rollouts, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("failed to list StackRollouts: %w", err)
	}
	for _, ro := range rollouts.Items {
		// A Stack may be held at, returned to or opened to any of these.
		for _, rev := range []*v1alpha1.RolloutRevision{ro.Status.Stable, ro.Status.Target, ro.Status.Aborted} {
			if rev != nil {
				live[rev.Digest] = true
			}
		}
	}
	var updates v1alpha1.UpdateList
	if err := a.Client.List(ctx, &updates, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("failed to list Updates: %w", err)
	}
	for _, u := range updates.Items {
		if !u.Status.Finished() {
			live[u.Spec.ArtifactDigest] = true
		}
	}
	return live, nil
}

// GitCache collects the git fetch cache every Interval: the repositories of remotes no
// resolve has used for Retention. Stacks poll their repositories every resync period, so
// a remote unused that long is one no Stack refers to any more.
type GitCache struct {
	Cache     *git.Cache
	Interval  time.Duration
	Retention time.Duration
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (g *GitCache) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable: it collects until ctx is done.
func (g *GitCache) Start(ctx context.Context) error {
	return every(ctx, g.Interval, "git-cache-gc", g.Collect)
}

// Collect removes the unused repositories.
func (g *GitCache) Collect(ctx context.Context) error {
	removed, err := g.Cache.Collect(g.Retention)
	if removed > 0 {
		ctrl.LoggerFrom(ctx).Info("Removed unused git repositories", "removed", removed)
	}
	return err
}

// every runs collect every interval until ctx is done. A failed collection is logged and
// tried again at the next tick: nothing depends on one having run.
func every(ctx context.Context, interval time.Duration, name string, collect func(context.Context) error) error {
	log := ctrl.LoggerFrom(ctx).WithName(name)
	ctx = ctrl.LoggerInto(ctx, log)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := collect(ctx); err != nil {
				log.Error(err, "Failed to collect")
			}
		}
	}
}
