package rollout

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The phases of a reconcile, in the order they run. Each either proceeds or ends the
// reconcile with the rollout's conditions saying why.

// selectStacks lists the rollout's Stacks; a selector that cannot select them stalls it.
func (r *Reconciler) selectStacks(ctx context.Context, s *scope) (bool, error) {
	sel, err := s.ro.StackSelector()
	if err != nil {
		markSelectionInvalid(s.ro, err)
		return false, nil
	}
	// A failed list is the cache's or the API server's, not the spec's: retried.
	stacks, err := r.selected(ctx, s.ro, sel)
	if err != nil {
		return false, err
	}
	s.list = stacks
	s.stacks = make(map[string]*pulumiv1.Stack, len(stacks))
	for i := range stacks {
		s.stacks[stacks[i].Name] = &stacks[i]
	}
	return true, nil
}

// selected lists the rollout's Stacks, by sel, in its namespace.
func (r *Reconciler) selected(ctx context.Context, ro *v1alpha1.StackRollout, sel labels.Selector) ([]pulumiv1.Stack, error) {
	var list pulumiv1.StackList
	// The cache's own objects, not copies: a rollout is reconciled on every change of
	// any of its Stacks, and copying the whole fleet each time made that quadratic. They
	// are only read (retry copies the one it patches).
	if err := r.Client.List(ctx, &list, client.InNamespace(ro.Namespace), client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("failed to list Stacks: %w", err)
	}
	out := list.Items[:0]
	for _, st := range list.Items {
		if st.DeletionTimestamp.IsZero() {
			out = append(out, st)
		}
	}
	return out, nil
}

// checkSources stalls a rollout whose Stacks deploy from more than one source: no revision
// is common to them. A rollout of template revisions does not roll out their source.
func checkSources(_ context.Context, s *scope) (bool, error) {
	if s.ro.Spec.Template != nil {
		return true, nil
	}
	if msg := mixedSources(s.list); msg != "" {
		markMixedSources(s.ro, msg)
		return false, nil
	}
	return true, nil
}

// handleRequests acts on new pause, abort and resume requests, and refuses (once) a
// promotion while no wave awaits one. A pause is handled before a resume: both new at once
// leave the rollout unpaused.
func (r *Reconciler) handleRequests(ctx context.Context, s *scope) (bool, error) {
	ro, st := s.ro, &s.ro.Status
	if st.Phase == "" {
		st.Phase = v1alpha1.RolloutIdle
	}
	if v := request(ro, v1alpha1.RolloutPauseAnnotation, st.HandledPause); v != "" {
		st.HandledPause = v
		if st.PauseTime == nil {
			recordPause(ro, s.now)
		} else {
			s.event(corev1.EventTypeNormal, EventRequestIgnored, "pause %q ignored: the rollout is paused already", v)
		}
	}
	active := st.Target != nil && (st.Phase == v1alpha1.RolloutProgressing || st.Phase == v1alpha1.RolloutHalted)
	if v := request(ro, v1alpha1.RolloutAbortAnnotation, st.HandledAbort); v != "" {
		st.HandledAbort = v
		if active {
			s.event(corev1.EventTypeWarning, EventRolloutAborted, "revision %s aborted at wave %s: the Stacks of the opened waves deploy %s again", st.Target.Revision, st.WaveName, revisionOf(st.Stable))
			recordAbort(ro)
		} else {
			s.event(corev1.EventTypeNormal, EventRequestIgnored, "abort %q ignored: no revision is being rolled out (phase %s)", v, st.Phase)
		}
	}
	if v := request(ro, v1alpha1.RolloutResumeAnnotation, st.HandledResume); v != "" {
		st.HandledResume = v
		unpaused := st.PauseTime != nil
		// Unpausing is idempotent: a retry of a failed resume below finds it done.
		recordUnpause(ro)
		switch {
		case st.Phase == v1alpha1.RolloutHalted:
			if err := r.retry(ctx, s, st.FailedStacks); err != nil {
				// Not handled: the reconcile's retry acts on it again.
				st.HandledResume = ""
				return false, err
			}
			recordResume(ro, s.now)
			s.event(corev1.EventTypeNormal, EventRolloutResumed, "resumed at wave %s: failures before now are forgiven and the failed Stacks are retried", st.WaveName)
		case unpaused:
			// checkPause announces the end of the pause.
		case ro.Spec.Paused:
			s.event(corev1.EventTypeNormal, EventRequestIgnored, "resume %q ignored: spec.paused pauses the rollout, which only setting it false lifts (phase %s)", v, st.Phase)
		default:
			s.event(corev1.EventTypeNormal, EventRequestIgnored, "resume %q ignored: the rollout is neither halted nor paused (phase %s)", v, st.Phase)
		}
	}
	if v := request(ro, v1alpha1.RolloutPromoteAnnotation, st.HandledPromote); v != "" && !awaitingPromotion(ro) {
		st.HandledPromote = v
		s.event(corev1.EventTypeNormal, EventRequestIgnored, "promote %q ignored: no wave awaits promotion (phase %s)", v, st.Phase)
	}
	return true, nil
}

// checkPause records whether the rollout is paused (by a request or by spec.paused), and
// announces when that changes. A paused rollout goes on watching its Stacks (a failure of
// an Update still running halts it), but starts nothing: see idle and progressWave.
func checkPause(_ context.Context, s *scope) (bool, error) {
	ro := s.ro
	was := conditions.IsTrue(ro, v1alpha1.ConditionPaused)
	markPaused(ro)
	switch now := ro.Paused(); {
	case now && !was:
		s.event(corev1.EventTypeNormal, EventRolloutPaused, "%s", conditions.Get(ro, v1alpha1.ConditionPaused).Message)
	case !now && was:
		s.event(corev1.EventTypeNormal, EventRolloutUnpaused, "no longer paused (phase %s, wave %s): what waited starts now", ro.Status.Phase, ro.Status.WaveName)
	}
	return true, nil
}

// request returns the value of an annotation not acted on yet, "" if none.
func request(ro *v1alpha1.StackRollout, annotation, handled string) string {
	if v := ro.Annotations[annotation]; v != "" && v != handled {
		return v
	}
	return ""
}

func awaitingPromotion(ro *v1alpha1.StackRollout) bool {
	st := &ro.Status
	return st.Target != nil && st.Phase == v1alpha1.RolloutProgressing && int(st.Wave) < len(st.Waves) &&
		st.Waves[st.Wave].State == v1alpha1.WaveAwaitingPromotion
}

// retry asks each failed Stack for a new try now, with PKO's reconcile-request annotation,
// rather than at the end of its backoff (or never, if it stalled).
func (r *Reconciler) retry(ctx context.Context, s *scope, names []string) error {
	value := s.now.UTC().Format(time.RFC3339Nano)
	for _, n := range names {
		cached, ok := s.stacks[n]
		if !ok {
			continue
		}
		st := cached.DeepCopy()
		p := client.MergeFrom(cached)
		if st.Annotations == nil {
			st.Annotations = map[string]string{}
		}
		st.Annotations[pulumiv1.ReconcileRequestAnnotation] = value
		if err := r.Client.Patch(ctx, st, p, client.FieldOwner(FieldManager)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to request a retry of Stack %s: %w", n, err)
		}
	}
	return nil
}

// chooseTarget starts the revision the Stacks' source offers when no rollout is under way
// and that revision is new; otherwise it says what the rollout waits for, if anything.
// The waves move only while there is a target.
func chooseTarget(_ context.Context, s *scope) (bool, error) {
	if s.ro.Status.Target == nil {
		idle(s)
	}
	return s.ro.Status.Target != nil, nil
}

// idle starts the revision the Stacks' source offers when it is new, or says that there is
// nothing to roll out.
func idle(s *scope) {
	ro, st := s.ro, &s.ro.Status
	// An automatic abort's return finishes before anything new starts.
	if returning(s) {
		return
	}
	if st.Stable == nil {
		st.Stable = s.deployed
	}
	avail := s.offered
	if ro.Spec.Template != nil && avail != nil && st.Stable != nil && avail.Revision != st.Stable.Revision && avail.Digest == st.Stable.Digest {
		// A template revision that renders what the stable one renders (a change of the
		// kind's schema, columns or approvers only) changes no Stack: there is nothing
		// to gate, and it becomes the stable revision at once.
		st.Stable = avail
	}
	if avail != nil && (st.Stable == nil || avail.Revision != st.Stable.Revision) && (st.Aborted == nil || avail.Revision != st.Aborted.Revision) {
		if ro.Paused() {
			markPausedBeforeStart(ro, avail)
			return
		}
		start(s, avail)
		return
	}
	switch {
	case st.Phase == v1alpha1.RolloutAborted:
		markAborted(ro, notAt(s.list, st.Stable, s.judge))
	case avail == nil && ro.Spec.Template != nil:
		markWaitingForTemplate(ro)
	case avail == nil && len(s.list) > 0:
		markWaitingForStacks(ro)
	default:
		markIdle(ro, notAt(s.list, st.Stable, s.judge), len(s.list))
	}
}

// start begins the rollout of target: the waves are planned from the Stacks selected now.
func start(s *scope, target *v1alpha1.RolloutRevision) {
	ro := s.ro
	from := revisionOf(ro.Status.Stable)
	recordStart(ro, target, planWaves(&ro.Spec, s.list), s.now)
	waveNames := make([]string, 0, len(ro.Status.Waves))
	for _, w := range ro.Status.Waves {
		waveNames = append(waveNames, fmt.Sprintf("%s (%d)", w.Name, len(w.Stacks)))
	}
	s.event(corev1.EventTypeNormal, EventRolloutStarted, "rolling out %s (from %s) in %d wave(s): %s", target.Revision, from, len(waveNames), strings.Join(waveNames, ", "))
}

// progressWaves moves the target through the waves as far as it can go now: a wave that
// passes opens the next one in the same reconcile, and the end of the last one makes the
// target stable and starts the revision that arrived meanwhile, if any.
func (r *Reconciler) progressWaves(ctx context.Context, s *scope) (bool, error) {
	for s.ro.Status.Target != nil {
		passed, err := r.progressWave(ctx, s)
		if err != nil || !passed {
			return false, err
		}
	}
	return true, nil
}

// progressWave moves the current wave on, and reports whether it passed (or the rollout
// completed); until then the conditions say what the wave waits for.
func (r *Reconciler) progressWave(ctx context.Context, s *scope) (bool, error) {
	ro, st := s.ro, &s.ro.Status
	if int(st.Wave) >= len(st.Waves) {
		complete(s)
		return true, nil
	}
	w := currentWave(ro)
	st.WaveName = w.Name
	count(st, s.isDone)
	if st.Phase == v1alpha1.RolloutHalted {
		return false, nil
	}
	if reason, faults := faultsOf(st, s.stacks, s.judge); len(faults) > 0 {
		halt(s, reason, faults)
		return false, nil
	}
	// Paused: the released Stacks finish what they run, and nothing else moves.
	if ro.Paused() {
		markWavePaused(ro)
		return false, nil
	}
	if newer := supersedes(s); newer != nil {
		if running := unfinished(w.Stacks[:w.Released], s.isDone); running > 0 {
			markSuperseding(ro, newer, running)
			return false, nil
		}
		s.event(corev1.EventTypeNormal, EventSuperseded, "revision %s superseded by %s at wave %s: %s starts from the first wave", st.Target.Revision, newer.Revision, w.Name, newer.Revision)
		start(s, newer)
		return true, nil
	}
	if w.State == v1alpha1.WavePreviewing {
		if passed, err := r.previewWave(ctx, s); err != nil || !passed {
			return false, err
		}
	}
	limit := ro.MaxParallelOf(w.Name, len(w.Stacks))
	release(w.Stacks, &w.Released, s.isDone, limit)
	if int(w.Updated) < len(w.Stacks) {
		if limit == 0 && int(w.Released) < len(w.Stacks) {
			markWaveHeld(ro)
		} else {
			markWaveUpdating(ro)
		}
		return false, nil
	}
	if recordWaveReady(ro, s.now) {
		s.event(corev1.EventTypeNormal, EventWaveReady, "wave %s: all %d Stack(s) Ready at %s", w.Name, len(w.Stacks), st.Target.Revision)
	}
	// The metric gates sample while the wave bakes, and may hold it past its bake time.
	sampled, failure, due := true, "", time.Duration(0)
	if len(ro.Spec.Gates.Metrics) > 0 {
		sampled, failure, due = r.sampleMetrics(ctx, s)
		s.requeue.After(due)
	}
	if failure != "" {
		halt(s, v1alpha1.ReasonMetricGateFailed, []string{failure})
		return false, nil
	}
	if left := ro.BakeTimeOf(w.Name) - s.now.Sub(w.ReadyTime.Time); left > 0 {
		markWaveBaking(ro, left)
		s.requeue.After(left)
		return false, nil
	}
	if !sampled {
		markWaveSampling(ro)
		return false, nil
	}
	if int(st.Wave) == len(st.Waves)-1 {
		w.State = v1alpha1.WaveDone
		complete(s)
		return true, nil
	}
	if passed, err := r.passGates(ctx, s); err != nil || !passed {
		return false, err
	}
	s.event(corev1.EventTypeNormal, EventWavePassed, "wave %s passed", w.Name)
	next := recordWavePassed(ro)
	s.event(corev1.EventTypeNormal, EventWaveStarted, "wave %s (%d Stack(s)) starts updating to %s", next.Name, len(next.Stacks), st.Target.Revision)
	return true, nil
}

// supersedes returns the revision offered in place of the target, when the rollout
// restarts with a newer revision (spec.newerRevision: Restart); nil otherwise. A revision
// aborted, or the stable one, supersedes nothing.
func supersedes(s *scope) *v1alpha1.RolloutRevision {
	st, next := &s.ro.Status, s.offered
	if s.ro.Spec.NewerRevision != v1alpha1.RolloutNewerRevisionRestart || next == nil || next.Revision == st.Target.Revision ||
		(st.Stable != nil && next.Revision == st.Stable.Revision) || (st.Aborted != nil && next.Revision == st.Aborted.Revision) {
		return nil
	}
	return next
}

// passGates runs the gates between the current wave and the next, the gate Job and then a
// person's promotion, and reports whether they passed.
func (r *Reconciler) passGates(ctx context.Context, s *scope) (bool, error) {
	ro, st := s.ro, &s.ro.Status
	if ro.Spec.Gates.JobFrom != nil {
		passed, failure, err := r.gate(ctx, s)
		switch {
		case err != nil:
			return false, err
		case failure != "":
			halt(s, v1alpha1.ReasonGateFailed, []string{failure})
			return false, nil
		case !passed:
			markWaveGating(ro)
			return false, nil
		}
	}
	if ro.Spec.Gates.Approval != v1alpha1.RolloutApprovalManual {
		return true, nil
	}
	w := currentWave(ro)
	if enterAwaitingPromotion(ro) {
		s.event(corev1.EventTypeNormal, EventAwaitPromotion, "wave %s passed its gates and awaits promotion: kubectl stackwright rollout promote %s", w.Name, ro.Name)
	}
	v := request(ro, v1alpha1.RolloutPromoteAnnotation, st.HandledPromote)
	if v == "" {
		markAwaitingPromotion(ro)
		return false, nil
	}
	st.HandledPromote = v
	s.event(corev1.EventTypeNormal, EventPromoted, "wave %s promoted (%s=%s)", w.Name, v1alpha1.RolloutPromoteAnnotation, v)
	return true, nil
}

// halt stops the rollout where it is: later waves keep what they have. With
// spec.autoAbort, it aborts the target instead, unless the automatic aborts in a row have
// reached their limit: then a person decides, as without it.
func halt(s *scope, reason string, faults []string) {
	ro, st := s.ro, &s.ro.Status
	if limit := ro.AutoAbortLimit(); limit > 0 {
		if st.AutomaticAborts < limit {
			s.event(corev1.EventTypeWarning, EventRolloutAborted, "revision %s aborted at wave %s automatically (%d of %d in a row, spec.autoAbort): %s; the Stacks that ran it return to %s, paced by their wave's maxParallel",
				st.Target.Revision, st.WaveName, st.AutomaticAborts+1, limit, strings.Join(firstN(faults, maxNamed), "; "), revisionOf(st.Stable))
			recordAutoAbort(ro)
			idle(s)
			return
		}
		faults = append(faults, fmt.Sprintf("not aborted automatically: the %d automatic abort(s) in a row spec.autoAbort.limit allows are used", limit))
	}
	msg := recordHalt(ro, reason, faults)
	s.event(corev1.EventTypeWarning, EventRolloutHalted, "%s", msg)
}

// returning lets the Stacks of an automatic abort's waves return to the stable revision,
// each wave at most maxParallel unfinished at a time (at least one: a held wave returns
// too; none more while paused), and reports whether some are not back yet; the conditions
// then say which.
func returning(s *scope) bool {
	ro, st := s.ro, &s.ro.Status
	if st.Phase != v1alpha1.RolloutAborted || !st.PacedAbort || st.Stable == nil {
		return false
	}
	back := func(name string) bool {
		stack, ok := s.stacks[name]
		if !ok {
			return true
		}
		v, _, _ := s.judge(stack, st.Stable, nil)
		return v == done
	}
	var behind []string
	for i := range st.Waves {
		w := &st.Waves[i]
		ran := w.Stacks[:w.Released]
		if !ro.Paused() {
			release(ran, &w.Returned, back, max(1, ro.MaxParallelOf(w.Name, len(w.Stacks))))
		}
		for _, n := range ran {
			if !back(n) {
				behind = append(behind, n)
			}
		}
	}
	if len(behind) == 0 {
		return false
	}
	sort.Strings(behind)
	markAborted(ro, behind)
	return true
}

// complete makes the target the stable revision (every wave has it), and starts the
// revision that arrived meanwhile, if any.
func complete(s *scope) {
	st := &s.ro.Status
	s.event(corev1.EventTypeNormal, EventRolloutSucceeded, "revision %s reached every wave (%d Stack(s)) in %s", st.Target.Revision, st.Stacks, s.now.Sub(st.StartTime.Time).Round(time.Second))
	recordComplete(s.ro, s.now)
	// A revision that arrived meanwhile waited behind this one: it starts now.
	idle(s)
}
