package manager

import (
	"context"
	"runtime/debug"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// memoryReleaser hands the heap a burst of engine runs freed back to the OS once the
// executor is idle again. The Go runtime returns freed heap only gradually (its scavenger
// keeps some over the heap goal and releases the rest over minutes), so after a fleet's
// updates the manager's RSS stays near the burst's peak for a long while, although what it
// holds live has not grown; a platform team sizes the manager's memory by its idle figure.
// A release costs one forced garbage collection, at most once per interval, and only after
// work.
type memoryReleaser struct {
	// pending is the executor's queued and running Updates.
	pending  func() (queued, running int)
	interval time.Duration
	release  func()
	busy     bool
}

func newMemoryReleaser(pending func() (int, int)) *memoryReleaser {
	return &memoryReleaser{pending: pending, interval: 30 * time.Second, release: debug.FreeOSMemory}
}

// Start implements manager.Runnable.
func (m *memoryReleaser) Start(ctx context.Context) error {
	tk := time.NewTicker(m.interval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tk.C:
			if m.tick() {
				ctrl.LoggerFrom(ctx).V(1).Info("Returned the memory a burst of updates freed to the OS")
			}
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: a replica that runs nothing
// is never busy, so it never releases either.
func (m *memoryReleaser) NeedLeaderElection() bool { return false }

// tick releases memory when the executor went idle since the last tick, and reports
// whether it did.
func (m *memoryReleaser) tick() bool {
	queued, running := m.pending()
	if queued+running > 0 {
		m.busy = true
		return false
	}
	if !m.busy {
		return false
	}
	m.busy = false
	m.release()
	return true
}
