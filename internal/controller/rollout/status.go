package rollout

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The setters below are pure functions of the rollout they are given and the facts passed
// in (the time included): the phases decide which one applies, and the deferred patch
// persists the result. They are the only writers of the rollout's conditions.

// maxNamed bounds how many Stacks a condition message names.
const maxNamed = 10

// markSelectionInvalid records a selector that cannot select the rollout's Stacks: only a
// new spec can fix it.
func markSelectionInvalid(ro *v1alpha1.StackRollout, err error) {
	conditions.MarkStalled(ro, pulumiv1.ReasonSpecInvalid, err.Error())
}

// markTemplateInvalid records that spec.template names no template whose revisions the
// rollout can roll out; msg says why.
func markTemplateInvalid(ro *v1alpha1.StackRollout, msg string) {
	conditions.MarkStalled(ro, pulumiv1.ReasonSpecInvalid, msg)
}

// markMixedSources records that the selected Stacks share no revision; msg says why.
func markMixedSources(ro *v1alpha1.StackRollout, msg string) {
	conditions.MarkStalled(ro, v1alpha1.ReasonMixedSources, msg)
}

// markMetricGateURLNotAllowed records that the refused metric gates (each naming its URL)
// may not query their Prometheus, for why; it reports whether that is news (the rollout
// did not say so already).
func markMetricGateURLNotAllowed(ro *v1alpha1.StackRollout, refused []string, why string) bool {
	msg := fmt.Sprintf("%s: %s. No request is sent, and nothing more starts (no revision, wave or Stack) until spec.gates.metrics or the allow-list changes",
		strings.Join(refused, "; "), why)
	c := conditions.Get(ro, pulumiv1.ConditionStalled)
	news := c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonMetricGateURLNotAllowed || c.Message != msg
	conditions.MarkStalled(ro, v1alpha1.ReasonMetricGateURLNotAllowed, msg)
	return news
}

// recordAbort abandons the target: the Stacks of the opened waves deploy the stable
// revision again, and the target is never rolled out again.
func recordAbort(ro *v1alpha1.StackRollout) {
	st := &ro.Status
	st.Aborted, st.Target = st.Target, nil
	st.Phase, st.FailedStacks, st.PacedAbort = v1alpha1.RolloutAborted, nil, false
	conditions.Remove(ro, v1alpha1.ConditionHalted)
}

// recordAutoAbort abandons the target as recordAbort does, on a halt, without a person: the
// current wave failed, and the Stacks that ran the target return to the stable revision
// paced by their wave (returning).
func recordAutoAbort(ro *v1alpha1.StackRollout) {
	st := &ro.Status
	currentWave(ro).State = v1alpha1.WaveFailed
	recordAbort(ro)
	st.PacedAbort = true
	st.AutomaticAborts++
	for i := range st.Waves {
		st.Waves[i].Returned = 0
	}
}

// recordResume moves a halted rollout on: failures that finished before now are forgiven.
func recordResume(ro *v1alpha1.StackRollout, now time.Time) {
	st := &ro.Status
	t := metav1.NewTime(now)
	st.Phase, st.ResumeTime, st.FailedStacks = v1alpha1.RolloutProgressing, &t, nil
	if int(st.Wave) < len(st.Waves) {
		// Failed metric samples are forgiven too: the gates sample afresh.
		st.Waves[st.Wave].Metrics = nil
	}
	conditions.Remove(ro, v1alpha1.ConditionHalted)
}

// recordPause pauses the rollout at now, at a pause request.
func recordPause(ro *v1alpha1.StackRollout, now time.Time) {
	t := metav1.NewTime(now)
	ro.Status.PauseTime = &t
}

// recordUnpause lifts a pause request (spec.paused, if set, still pauses the rollout).
func recordUnpause(ro *v1alpha1.StackRollout) {
	ro.Status.PauseTime = nil
}

// markPaused sets the Paused condition while the rollout is paused, saying who paused it,
// and removes it otherwise.
func markPaused(ro *v1alpha1.StackRollout) {
	st := &ro.Status
	switch {
	case ro.Spec.Paused:
		conditions.Set(ro, v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonSpecPaused,
			"spec.paused is true: nothing new starts (the Updates already running finish) until it is set false")
	case st.PauseTime != nil:
		conditions.Set(ro, v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPauseRequested, fmt.Sprintf(
			"paused by %s=%s: nothing new starts (the Updates already running finish) until `kubectl stackwright rollout resume %s`",
			v1alpha1.RolloutPauseAnnotation, st.HandledPause, ro.Name))
	default:
		conditions.Remove(ro, v1alpha1.ConditionPaused)
	}
}

// markPausedBeforeStart records that the paused rollout does not start the offered
// revision yet.
func markPausedBeforeStart(ro *v1alpha1.StackRollout, offered *v1alpha1.RolloutRevision) {
	conditions.MarkReconciling(ro, v1alpha1.ReasonRolloutPaused, fmt.Sprintf("paused: revision %s is offered and starts once the rollout is resumed", offered.Revision))
}

// markWavePaused records that the paused rollout moves its current wave no further.
func markWavePaused(ro *v1alpha1.StackRollout) {
	st, w := &ro.Status, currentWave(ro)
	conditions.MarkReconciling(ro, v1alpha1.ReasonRolloutPaused, fmt.Sprintf("paused at wave %s (%d of %d, %s): %d of %d Stack(s) at %s, %d released; the released Stacks finish, nothing more starts until the rollout is resumed",
		w.Name, st.Wave+1, len(st.Waves), w.State, w.Updated, len(w.Stacks), st.Target.Revision, w.Released))
}

// markAborted says how far the return to the stable revision is; behind lists the Stacks
// not Ready at it yet.
func markAborted(ro *v1alpha1.StackRollout, behind []string) {
	st := &ro.Status
	switch {
	case len(behind) > 0:
		conditions.MarkReconciling(ro, v1alpha1.ReasonRollingBack, fmt.Sprintf("revision %s was aborted; %d Stack(s) are deploying %s again: %s",
			revisionOf(st.Aborted), len(behind), revisionOf(st.Stable), names(behind)))
	case st.Stable == nil:
		conditions.MarkReady(ro, v1alpha1.ReasonRolloutAborted, fmt.Sprintf("revision %s was aborted; no revision ever reached every wave, so there is none to return to and the Stacks keep what they have; a newer revision starts a new rollout",
			revisionOf(st.Aborted)))
	default:
		conditions.MarkReady(ro, v1alpha1.ReasonRolloutAborted, fmt.Sprintf("revision %s was aborted and every Stack has %s; a newer revision starts a new rollout",
			revisionOf(st.Aborted), revisionOf(st.Stable)))
	}
}

// markWaitingForStacks records that no selected Stack has said yet what its source offers.
func markWaitingForStacks(ro *v1alpha1.StackRollout) {
	conditions.MarkReconciling(ro, v1alpha1.ReasonRolloutWaiting, "waiting for the selected Stacks to report the revision their source offers")
}

// markWaitingForTemplate records that the template has not served a revision yet.
func markWaitingForTemplate(ro *v1alpha1.StackRollout) {
	conditions.MarkReconciling(ro, v1alpha1.ReasonRolloutWaiting, fmt.Sprintf("waiting for StackTemplate %s to serve its first revision", ro.Spec.Template.Name))
}

// markIdle records that there is nothing to roll out; behind lists the Stacks not Ready at
// the stable revision yet, of stacks selected.
func markIdle(ro *v1alpha1.StackRollout, behind []string, stacks int) {
	st := &ro.Status
	st.Phase = v1alpha1.RolloutIdle
	if len(behind) > 0 {
		conditions.MarkReconciling(ro, v1alpha1.ReasonConverging, fmt.Sprintf("%d Stack(s) are deploying the stable revision %s: %s",
			len(behind), revisionOf(st.Stable), names(behind)))
		return
	}
	conditions.MarkReady(ro, v1alpha1.ReasonRolledOut, fmt.Sprintf("%d Stack(s) at %s; no newer revision is offered", stacks, revisionOf(st.Stable)))
}

// recordStart begins the rollout of target through waves at now: the first wave opens.
func recordStart(ro *v1alpha1.StackRollout, target *v1alpha1.RolloutRevision, waves []v1alpha1.RolloutWaveStatus, now time.Time) {
	st := &ro.Status
	t := metav1.NewTime(now)
	st.Target, st.Phase, st.PacedAbort = target, v1alpha1.RolloutProgressing, false
	st.Waves, st.Wave = waves, 0
	st.StartTime, st.CompletionTime, st.ResumeTime, st.FailedStacks = &t, nil, nil, nil
	conditions.Remove(ro, v1alpha1.ConditionHalted)
	if len(st.Waves) > 0 {
		st.WaveName = st.Waves[0].Name
		st.Waves[0].State = ro.OpeningState()
	}
}

// currentWave is the wave the target is at.
func currentWave(ro *v1alpha1.StackRollout) *v1alpha1.RolloutWaveStatus {
	return &ro.Status.Waves[ro.Status.Wave]
}

// markWaveUpdating says how far the current wave's Stacks are. A wave that fell out of
// Ready bakes afresh once it is back, and its metric gates sample afresh.
func markWaveUpdating(ro *v1alpha1.StackRollout) {
	st, w := &ro.Status, currentWave(ro)
	notReady(w)
	conditions.MarkReconciling(ro, v1alpha1.ReasonWaveUpdating, fmt.Sprintf("wave %s (%d of %d): %d of %d Stack(s) at %s, %d released",
		w.Name, st.Wave+1, len(st.Waves), w.Updated, len(w.Stacks), st.Target.Revision, w.Released))
}

// markWavePreviewing records that the current wave waits for pending of its Stacks'
// previews of the target.
func markWavePreviewing(ro *v1alpha1.StackRollout, pending []string) {
	st, w := &ro.Status, currentWave(ro)
	conditions.MarkReconciling(ro, v1alpha1.ReasonWavePreviewing, fmt.Sprintf("wave %s (%d of %d): %d of %d Stack(s) are previewing %s for spec.gates.preview before any is released: %s",
		w.Name, st.Wave+1, len(st.Waves), len(pending), len(w.Stacks), st.Target.Revision, names(pending)))
}

// recordPreviewsPassed opens the current wave, whose previews passed.
func recordPreviewsPassed(ro *v1alpha1.StackRollout) {
	currentWave(ro).State = v1alpha1.WaveUpdating
}

// markWaveHeld records that the current wave's maxParallel is 0 (spec.waves.pace): no more
// of its Stacks are released until it is raised.
func markWaveHeld(ro *v1alpha1.StackRollout) {
	st, w := &ro.Status, currentWave(ro)
	notReady(w)
	conditions.MarkReconciling(ro, v1alpha1.ReasonWaveHeld, fmt.Sprintf("wave %s (%d of %d) is held by maxParallel 0 in spec.waves.pace: %d of %d Stack(s) at %s, %d released; raise it to go on",
		w.Name, st.Wave+1, len(st.Waves), w.Updated, len(w.Stacks), st.Target.Revision, w.Released))
}

// markSuperseding records that newer supersedes the target once the current wave's
// running released Stacks finish.
func markSuperseding(ro *v1alpha1.StackRollout, newer *v1alpha1.RolloutRevision, running int32) {
	st, w := &ro.Status, currentWave(ro)
	conditions.MarkReconciling(ro, v1alpha1.ReasonSuperseding, fmt.Sprintf("revision %s supersedes %s: %d released Stack(s) of wave %s finish %s first, then %s starts from the first wave",
		newer.Revision, st.Target.Revision, running, w.Name, st.Target.Revision, newer.Revision))
}

// notReady records that wave w is not Ready at the target (any more): it updates, and
// its bake and metric samples start afresh once it is.
func notReady(w *v1alpha1.RolloutWaveStatus) {
	w.ReadyTime, w.Metrics = nil, nil
	w.State = v1alpha1.WaveUpdating
}

// recordWaveReady records now as the time every Stack of the current wave was first Ready
// at the target, unless one is recorded; it reports whether it recorded it (the wave's bake
// starts).
func recordWaveReady(ro *v1alpha1.StackRollout, now time.Time) bool {
	w := currentWave(ro)
	if w.ReadyTime != nil {
		return false
	}
	t := metav1.NewTime(now)
	w.ReadyTime = &t
	return true
}

// markWaveBaking records that the current wave bakes for left more.
func markWaveBaking(ro *v1alpha1.StackRollout, left time.Duration) {
	w := currentWave(ro)
	w.State = v1alpha1.WaveBaking
	conditions.MarkReconciling(ro, v1alpha1.ReasonWaveBaking, fmt.Sprintf("wave %s is Ready at %s and bakes for %s more", w.Name, ro.Status.Target.Revision, left.Round(time.Second)))
}

// markWaveSampling records that the current wave baked and waits for its metric gates'
// consecutive successes.
func markWaveSampling(ro *v1alpha1.StackRollout) {
	w := currentWave(ro)
	w.State = v1alpha1.WaveBaking
	var gates []string
	for _, g := range ro.Spec.Gates.Metrics {
		for _, m := range w.Metrics {
			if m.Name == g.Name {
				gates = append(gates, fmt.Sprintf("%s: %d of %d successes, last value %s", g.Name, m.Successes, successesOf(&g), m.Value))
			}
		}
	}
	conditions.MarkReconciling(ro, v1alpha1.ReasonWaveSampling, fmt.Sprintf("wave %s baked at %s; its metric gates sample: %s", w.Name, ro.Status.Target.Revision, strings.Join(gates, "; ")))
}

// markWaveGating records that the current wave's gate Job runs.
func markWaveGating(ro *v1alpha1.StackRollout) {
	w := currentWave(ro)
	w.State = v1alpha1.WaveGating
	conditions.MarkReconciling(ro, v1alpha1.ReasonWaveGating, fmt.Sprintf("wave %s is Ready at %s; its gate Job %s runs", w.Name, ro.Status.Target.Revision, w.GateJob))
}

// enterAwaitingPromotion records that the current wave passed its gates and waits for a
// person; it reports whether the wave did not wait already.
func enterAwaitingPromotion(ro *v1alpha1.StackRollout) bool {
	w := currentWave(ro)
	if w.State == v1alpha1.WaveAwaitingPromotion {
		return false
	}
	w.State = v1alpha1.WaveAwaitingPromotion
	return true
}

// markAwaitingPromotion says how to promote the current wave.
func markAwaitingPromotion(ro *v1alpha1.StackRollout) {
	conditions.MarkReconciling(ro, v1alpha1.ReasonAwaitingPromotion, fmt.Sprintf(
		"wave %s passed its gates; promote it with `kubectl stackwright rollout promote %s` or `kubectl annotate stackrollout %s %s=$(date +%%s) --overwrite`",
		currentWave(ro).Name, ro.Name, ro.Name, v1alpha1.RolloutPromoteAnnotation))
}

// recordWavePassed closes the current wave, done, and opens the next, which it returns.
func recordWavePassed(ro *v1alpha1.StackRollout) *v1alpha1.RolloutWaveStatus {
	currentWave(ro).State = v1alpha1.WaveDone
	ro.Status.Wave++
	next := currentWave(ro)
	next.State = ro.OpeningState()
	return next
}

// recordHalt stops the rollout at the current wave for reason, the faults saying what
// failed: later waves keep what they have. It returns the message it recorded.
func recordHalt(ro *v1alpha1.StackRollout, reason string, faults []string) string {
	st := &ro.Status
	st.Phase = v1alpha1.RolloutHalted
	currentWave(ro).State = v1alpha1.WaveFailed
	msg := fmt.Sprintf("wave %s failed at %s: %s; later waves keep their revision. Fix it and resume (`kubectl stackwright rollout resume %s`), or abort (`kubectl stackwright rollout abort %s`: the opened waves deploy %s again)",
		st.WaveName, st.Target.Revision, strings.Join(firstN(faults, maxNamed), "; "), ro.Name, ro.Name, revisionOf(st.Stable))
	conditions.Set(ro, v1alpha1.ConditionHalted, metav1.ConditionTrue, reason, msg)
	conditions.MarkStalled(ro, reason, msg)
	return msg
}

// recordComplete makes the target, which every wave has, the stable revision at now: the
// automatic aborts in a row start again from 0.
func recordComplete(ro *v1alpha1.StackRollout, now time.Time) {
	st := &ro.Status
	t := metav1.NewTime(now)
	st.Stable, st.Target = st.Target, nil
	st.Phase, st.CompletionTime, st.AutomaticAborts = v1alpha1.RolloutIdle, &t, 0
}

// finalizeStatus records the generation as observed once the rollout is Ready or Stalled
// for it, and clears Reconciling then: a halted rollout reads as stalled, not in progress.
func finalizeStatus(ro *v1alpha1.StackRollout) {
	conditions.Finalize(ro, &ro.Status.ObservedGeneration)
}

// names lists at most maxNamed names, saying how many more there are.
func names(list []string) string { return namesUpTo(list, maxNamed) }

// namesUpTo lists at most n of list, saying how many more there are.
func namesUpTo(list []string, n int) string {
	s := strings.Join(firstN(list, n), ", ")
	if len(list) > n {
		s += fmt.Sprintf(" and %d more", len(list)-n)
	}
	return s
}

func firstN[T any](list []T, n int) []T {
	if len(list) > n {
		return list[:n]
	}
	return list
}

func revisionOf(r *v1alpha1.RolloutRevision) string {
	if r == nil {
		return "(none)"
	}
	return r.Revision
}
