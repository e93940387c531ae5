package stack

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"time"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/source"
)

// keyInput is everything a desired state is derived from. Its JSON encoding is hashed, so
// field order is fixed by the struct and maps are not allowed.
type keyInput struct {
	Revision         string   `json:"revision"`
	Digest           string   `json:"digest"`
	Dir              string   `json:"dir"`
	Generation       int64    `json:"generation"`
	Inputs           string   `json:"inputs"`
	Operation        string   `json:"operation"`
	Refresh          bool     `json:"refresh"`
	ExpectNoChanges  bool     `json:"expectNoChanges"`
	Targets          []string `json:"targets"`
	TargetDependents bool     `json:"targetDependents"`
}

// desiredStateKey hashes the source artifact, the spec generation, the fingerprint of the
// referenced ConfigMaps and Secrets, and the operation with its options.
func desiredStateKey(stack *pulumiv1.Stack, op v1alpha1.UpdateType, a source.Artifact, inputsFingerprint string) string {
	spec := &stack.Spec
	b, _ := json.Marshal(keyInput{ // a struct of strings, bools and ints always marshals
		Revision:         a.Revision,
		Digest:           a.Digest,
		Dir:              a.Dir,
		Generation:       stack.Generation,
		Inputs:           inputsFingerprint,
		Operation:        string(op),
		Refresh:          spec.Refresh,
		ExpectNoChanges:  spec.ExpectNoRefreshChanges,
		Targets:          spec.Targets,
		TargetDependents: spec.TargetDependents,
	})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// operation is what reconciling the Stack runs: PKO's preview stacks only ever preview.
func operation(spec *pulumiv1.StackSpec) v1alpha1.UpdateType {
	if spec.Preview {
		return v1alpha1.UpdateTypePreview
	}
	return v1alpha1.UpdateTypeUp
}

// action is what a reconcile should do next.
type action int

const (
	// actionIdle: the desired state is deployed; come back after requeueAfter (0: only on
	// a watch event).
	actionIdle action = iota
	// actionRun: start an Update.
	actionRun
	// actionBackoff: the last attempt failed; retry after requeueAfter.
	actionBackoff
	// actionStalled: permanent failures exhausted the attempts; wait for a change.
	actionStalled
	// actionWaitForLock: the last attempt found the stack locked by another update (or by
	// one whose holder could not be proven gone); retry after requeueAfter, never stall.
	actionWaitForLock
)

// decision is the outcome of decide.
type decision struct {
	action       action
	attempt      int32
	requeueAfter time.Duration
	// why explains a run, for the Reconciling message and the Update's message.
	why string
	// refresh makes the run refresh first whatever the spec says: remediating drift needs
	// the real state, or the update finds nothing to change.
	refresh bool
}

// policy holds the manager-wide retry settings.
type policy struct {
	// base is the first retry delay (backoffBase unless a test shortens it).
	base time.Duration
	// maxBackoff caps the retry delay when the Stack does not set its own.
	maxBackoff time.Duration
	// stallAfter is how many consecutive permanent failures stall a Stack.
	stallAfter int32
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

// backoff is the delay before retry number failures (≥ 1): base × 3^(failures-1), capped,
// with ±10% jitter. The jitter is derived from seed (the Stack's UID) and failures, so every
// reconcile of the same failure computes the same retry time and a fleet that failed
// together does not retry together.
func backoff(base time.Duration, failures int64, limit time.Duration, seed string) time.Duration {
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

// decide chooses what to do for a Stack with no Update in flight whose desired state has the
// given key. It is pure: everything it needs is in its arguments and the Stack's status.
// Starting a run records the key in status.stackwright.lastAttemptedKey (and resets the
// failure counters for a new key), which is what later calls compare against.
func decide(now time.Time, stack *pulumiv1.Stack, key string, p policy) decision {
	st := &stack.Status
	sw := st.Stackwright
	if sw == nil {
		sw = &pulumiv1.StackwrightStatus{}
	}
	next := func(why string) decision {
		attempt := int32(1)
		if sw.LastAttemptedKey == key && sw.Attempt < math.MaxInt32 {
			// A status written by hand may hold anything; attempts count from 1.
			attempt = max(sw.Attempt, 0) + 1
		} else if sw.LastAttemptedKey == key {
			attempt = math.MaxInt32
		}
		return decision{action: actionRun, attempt: attempt, why: why}
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
		if !locked && sw.PermanentFailures >= p.stallAfter {
			return decision{action: actionStalled}
		}
		limit := p.maxBackoff
		if s := stack.Spec.RetryMaxBackoffDurationSeconds; s > 0 {
			// Seconds beyond what a Duration holds would wrap around to a negative cap.
			limit = min(time.Duration(min(s, math.MaxInt64/int64(time.Second)))*time.Second, maxRetryBackoff)
		}
		failures, waiting := lu.Failures, actionBackoff
		if locked {
			waiting, limit = actionWaitForLock, min(limit, maxLockWait)
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
		base := p.base
		if base <= 0 {
			base = backoffBase
		}
		if d := last.Add(backoff(base, failures, limit, string(stack.UID))).Sub(now); d > 0 {
			return decision{action: waiting, requeueAfter: d}
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
		d.refresh = true
		return d
	}
	if resync := stack.Spec.ResyncPeriod(); resync > 0 && stack.Spec.ContinueResyncOnCommitMatch {
		var last time.Time
		if lu != nil && lu.LastResyncTime != nil {
			last = lu.LastResyncTime.Time
		}
		if wait := last.Add(resync).Sub(now); wait > 0 {
			return decision{action: actionIdle, requeueAfter: wait}
		}
		return next("periodic resync")
	}
	return decision{action: actionIdle}
}
