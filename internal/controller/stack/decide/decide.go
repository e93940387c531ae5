package decide

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"time"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Action is what a reconcile should do next.
type Action int

const (
	// Idle: the desired state is deployed; come back after RequeueAfter (0: only on a
	// watch event).
	Idle Action = iota
	// Run: start an Update.
	Run
	// Backoff: the last attempt failed; retry after RequeueAfter.
	Backoff
	// Stalled: permanent failures exhausted the attempts, or the engine lacks a plugin;
	// wait for a change.
	Stalled
	// WaitForLock: the last attempt found the stack locked by another update (or by one
	// whose holder could not be proven gone); retry after RequeueAfter, never stall.
	WaitForLock
)

// Decision is the outcome of Next.
type Decision struct {
	Action Action
	// Attempt numbers a run within its desired state, from 1.
	Attempt      int32
	RequeueAfter time.Duration
	// Why explains a run, for the Reconciling message and the Update's message.
	Why string
	// Refresh makes the run refresh first whatever the spec says: remediating drift needs
	// the real state, or the update finds nothing to change.
	Refresh bool
}

// Policy holds the manager-wide retry settings.
type Policy struct {
	// Base is the first retry delay (10 s when zero; tests shorten it).
	Base time.Duration
	// MaxBackoff caps the retry delay when the Stack does not set its own.
	MaxBackoff time.Duration
	// StallAfter is how many consecutive permanent failures stall a Stack.
	StallAfter int32
}

const (
	// maxRetryBackoff caps every retry delay, whatever a Stack asks for: past it, a
	// delay's arithmetic would overflow.
	maxRetryBackoff = 365 * 24 * time.Hour
	backoffBase     = 10 * time.Second
	backoffFactor   = 3
	backoffJitter   = 0.1
	// maxLockWait caps the delay between tries on a locked stack: a lock is an update in
	// progress, minutes long, and a Stack should follow soon after it ends.
	maxLockWait = 5 * time.Minute
)

// retryDelay is the delay before retry number failures (≥ 1): base × 3^(failures-1), capped,
// with ±10% jitter. The jitter is derived from seed (the Stack's UID) and failures, so every
// reconcile of the same failure computes the same retry time and a fleet that failed
// together does not retry together.
func retryDelay(base time.Duration, failures int64, limit time.Duration, seed string) time.Duration {
	if failures < 1 {
		failures = 1
	}
	if limit <= 0 || limit > maxRetryBackoff {
		limit = maxRetryBackoff
	}
	d := min(float64(base)*math.Pow(backoffFactor, float64(failures-1)), float64(limit))
	sum := sha256.Sum256([]byte(seed + "/" + time.Duration(failures).String()))
	u := float64(binary.BigEndian.Uint64(sum[:8])) / float64(math.MaxUint64) // [0, 1]
	return time.Duration(d * (1 + backoffJitter*(2*u-1)))
}

// Next chooses what to do for a Stack with no Update in flight whose desired state has the
// given key. It is pure: everything it needs is in its arguments and the Stack's status.
// Starting a run records the key in status.stackwright.lastAttemptedKey (and resets the
// failure counters for a new key), which is what later calls compare against.
func Next(now time.Time, stack *pulumiv1.Stack, key string, p Policy) Decision {
	st := &stack.Status
	sw := st.Stackwright
	if sw == nil {
		sw = &pulumiv1.StackwrightStatus{}
	}
	next := func(why string) Decision {
		attempt := int32(1)
		if sw.LastAttemptedKey == key && sw.Attempt < math.MaxInt32 {
			// A status written by hand may hold anything; attempts count from 1.
			attempt = max(sw.Attempt, 0) + 1
		} else if sw.LastAttemptedKey == key {
			attempt = math.MaxInt32
		}
		return Decision{Action: Run, Attempt: attempt, Why: why}
	}
	requested := stack.ReconcileRequested()
	lu := st.LastUpdate

	if key != sw.LastAttemptedKey {
		if sw.LastAttemptedKey == "" {
			return next("first update")
		}
		return next("desired state changed")
	}
	if lu != nil && lu.State == pulumiv1.UpdateStateFailed {
		if requested {
			return next("reconcile requested")
		}
		locked := sw.LastFailureReason == v1alpha1.ReasonUpdateConflict
		if !locked && sw.PermanentFailures >= p.StallAfter {
			return Decision{Action: Stalled}
		}
		if v1alpha1.FailsEveryRun(sw.LastFailureReason) {
			return Decision{Action: Stalled}
		}
		limit := p.MaxBackoff
		if s := stack.Spec.RetryMaxBackoffDurationSeconds; s > 0 {
			// Seconds beyond what a Duration holds would wrap around to a negative cap.
			limit = min(time.Duration(min(s, math.MaxInt64/int64(time.Second)))*time.Second, maxRetryBackoff)
		}
		failures, waiting := lu.Failures, Backoff
		if locked {
			waiting, limit = WaitForLock, min(limit, maxLockWait)
			if stack.Spec.RetryOnUpdateConflict {
				// PKO's retryOnUpdateConflict asks for a prompt retry: every try waits
				// the first retry's delay, none backs off.
				failures = 1
			}
		}
		var last time.Time
		if lu.LastResyncTime != nil {
			last = lu.LastResyncTime.Time
		}
		base := p.Base
		if base <= 0 {
			base = backoffBase
		}
		if d := last.Add(retryDelay(base, failures, limit, string(stack.UID))).Sub(now); d > 0 {
			return Decision{Action: waiting, RequeueAfter: d}
		}
		if locked {
			return next("retrying on a stack that was locked")
		}
		return next("retrying after failure")
	}
	if key != sw.LastSuccessfulKey {
		// Attempted but neither failed nor succeeded: the last Update was lost.
		return next("retrying lost update")
	}
	if requested {
		return next("reconcile requested")
	}
	if sw.RemediateDrift {
		d := next("remediating drift")
		d.Refresh = true
		return d
	}
	if resync := stack.Spec.ResyncPeriod(); resync > 0 && stack.Spec.ContinueResyncOnCommitMatch {
		var last time.Time
		if lu != nil && lu.LastResyncTime != nil {
			last = lu.LastResyncTime.Time
		}
		if wait := last.Add(resync).Sub(now); wait > 0 {
			return Decision{Action: Idle, RequeueAfter: wait}
		}
		return next("periodic resync")
	}
	return Decision{Action: Idle}
}
