package rollout

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/statustest"
)

var (
	testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rev1    = &v1alpha1.RolloutRevision{Revision: "generation/1", Digest: "sha256:1"}
	rev2    = &v1alpha1.RolloutRevision{Revision: "generation/2", Digest: "sha256:2"}
)

// testGeneration is the generation of the rollouts the setters are given; gen builds the
// conditions they write.
const testGeneration = 3

var gen = statustest.Generation(testGeneration)

// progressing is a rollout of generation/2 at its first wave, which has one Stack.
func progressing() v1alpha1.StackRolloutStatus {
	return v1alpha1.StackRolloutStatus{
		Phase: v1alpha1.RolloutProgressing, Stable: rev1, Target: rev2, WaveName: "0",
		Waves: []v1alpha1.RolloutWaveStatus{
			{Name: "0", Stacks: []string{"a"}, Released: 1, Updated: 1, State: v1alpha1.WaveUpdating},
			{Name: "1", Stacks: []string{"b", "c"}, State: v1alpha1.WavePending},
		},
		Conditions: gen.Reconciling(v1alpha1.ReasonWaveUpdating, "wave 0 (1 of 2): 0 of 1 Stack(s) at generation/2, 1 released"),
	}
}

// halted is progressing, halted at its first wave.
func halted() v1alpha1.StackRolloutStatus {
	st := progressing()
	st.Phase, st.FailedStacks = v1alpha1.RolloutHalted, []string{"a"}
	st.Waves[0].State = v1alpha1.WaveFailed
	st.Conditions = append(gen.Stalled(v1alpha1.ReasonStackUpdateFailed, "wave 0 failed"),
		gen.Condition(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonStackUpdateFailed, "wave 0 failed"))
	return st
}

// Each setter records what it is told, and nothing else: the table gives the status
// before, the setter's call (and what it returns), and what it changes.
func TestStatus_Setters_RecordTheirTransition(t *testing.T) {
	now := metav1.NewTime(testNow)
	earlier := metav1.NewTime(testNow.Add(-time.Minute))
	tests := []statustest.Transition[*v1alpha1.StackRollout, v1alpha1.StackRolloutStatus]{
		{
			Name: "MarkSelectionInvalid",
			Set: func(ro *v1alpha1.StackRollout) any {
				markSelectionInvalid(ro, errors.New("spec.selector is invalid: bad"))
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Conditions = gen.Stalled(pulumiv1.ReasonSpecInvalid, "spec.selector is invalid: bad")
			},
		},
		{
			Name:   "MarkMixedSources",
			Before: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutIdle, Conditions: gen.Ready(v1alpha1.ReasonRolledOut, "2 Stack(s) at generation/1")},
			Set: func(ro *v1alpha1.StackRollout) any {
				markMixedSources(ro, "two sources")
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Conditions = gen.Stalled(v1alpha1.ReasonMixedSources, "two sources")
			},
		},
		{
			Name:   "RecordAbortForgetsTheTargetAndTheHalt",
			Before: halted(),
			Set: func(ro *v1alpha1.StackRollout) any {
				recordAbort(ro)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Aborted, st.Target, st.Phase, st.FailedStacks = rev2, nil, v1alpha1.RolloutAborted, nil
				st.Conditions = st.Conditions[:2]
			},
		},
		{
			Name:   "RecordResumeForgivesUntilNow",
			Before: halted(),
			Set: func(ro *v1alpha1.StackRollout) any {
				recordResume(ro, testNow)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Phase, st.ResumeTime, st.FailedStacks = v1alpha1.RolloutProgressing, &now, nil
				st.Conditions = st.Conditions[:2]
			},
		},
		{
			Name:   "RecordPauseAndMarkPausedByRequest",
			Before: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutIdle, HandledPause: "t1"},
			Set: func(ro *v1alpha1.StackRollout) any {
				recordPause(ro, testNow)
				markPaused(ro)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.PauseTime = &now
				st.Conditions = []metav1.Condition{gen.Condition(v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPauseRequested,
					"paused by stackwright.dev/pause=t1: nothing new starts (the Updates already running finish) until `kubectl stackwright rollout resume fleet`")}
			},
		},
		{
			Name: "RecordUnpauseAndMarkNotPaused",
			Before: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutIdle, PauseTime: &earlier,
				Conditions: []metav1.Condition{gen.Condition(v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPauseRequested, "paused")}},
			Set: func(ro *v1alpha1.StackRollout) any {
				recordUnpause(ro)
				markPaused(ro)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.PauseTime, st.Conditions = nil, nil
			},
		},
		{
			Name:   "MarkWavePaused",
			Before: progressing(),
			Set: func(ro *v1alpha1.StackRollout) any {
				markWavePaused(ro)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Conditions = gen.Reconciling(v1alpha1.ReasonRolloutPaused, "paused at wave 0 (1 of 2, Updating): 1 of 1 Stack(s) at generation/2, 1 released; the released Stacks finish, nothing more starts until the rollout is resumed")
			},
		},
		{
			Name:   "MarkWaveHeld",
			Before: progressing(),
			Set: func(ro *v1alpha1.StackRollout) any {
				markWaveHeld(ro)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Conditions = gen.Reconciling(v1alpha1.ReasonWaveHeld, "wave 0 (1 of 2) is held by maxParallel 0 in spec.waves.pace: 1 of 1 Stack(s) at generation/2, 1 released; raise it to go on")
			},
		},
		{
			Name:   "MarkSuperseding",
			Before: progressing(),
			Set: func(ro *v1alpha1.StackRollout) any {
				markSuperseding(ro, &v1alpha1.RolloutRevision{Revision: "generation/3"}, 1)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Conditions = gen.Reconciling(v1alpha1.ReasonSuperseding, "revision generation/3 supersedes generation/2: 1 released Stack(s) of wave 0 finish generation/2 first, then generation/3 starts from the first wave")
			},
		},
		{
			Name:   "MarkPausedBeforeStart",
			Before: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutIdle, Stable: rev1},
			Set: func(ro *v1alpha1.StackRollout) any {
				markPausedBeforeStart(ro, rev2)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Conditions = gen.Reconciling(v1alpha1.ReasonRolloutPaused, "paused: revision generation/2 is offered and starts once the rollout is resumed")
			},
		},
		{
			Name:   "MarkAbortedWhileRollingBack",
			Before: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutAborted, Stable: rev1, Aborted: rev2},
			Set: func(ro *v1alpha1.StackRollout) any {
				markAborted(ro, []string{"a", "b"})
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Conditions = gen.Reconciling(v1alpha1.ReasonRollingBack, "revision generation/2 was aborted; 2 Stack(s) are deploying generation/1 again: a, b")
			},
		},
		{
			Name:   "MarkAbortedOnceRolledBack",
			Before: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutAborted, Stable: rev1, Aborted: rev2},
			Set: func(ro *v1alpha1.StackRollout) any {
				markAborted(ro, nil)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Conditions = gen.Ready(v1alpha1.ReasonRolloutAborted, "revision generation/2 was aborted and every Stack has generation/1; a newer revision starts a new rollout")
			},
		},
		{
			Name:   "MarkAbortedWithNoStableRevision",
			Before: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutAborted, Aborted: rev2},
			Set: func(ro *v1alpha1.StackRollout) any {
				markAborted(ro, nil)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Conditions = gen.Ready(v1alpha1.ReasonRolloutAborted, "revision generation/2 was aborted; no revision ever reached every wave, so there is none to return to and the Stacks keep what they have; a newer revision starts a new rollout")
			},
		},
		{
			Name:   "MarkWaitingForStacks",
			Before: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutIdle},
			Set: func(ro *v1alpha1.StackRollout) any {
				markWaitingForStacks(ro)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Conditions = gen.Reconciling(v1alpha1.ReasonRolloutWaiting, "waiting for the selected Stacks to report the revision their source offers")
			},
		},
		{
			Name:   "MarkIdleWhileConverging",
			Before: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutHalted, Stable: rev1},
			Set: func(ro *v1alpha1.StackRollout) any {
				markIdle(ro, []string{"c"}, 3)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Phase = v1alpha1.RolloutIdle
				st.Conditions = gen.Reconciling(v1alpha1.ReasonConverging, "1 Stack(s) are deploying the stable revision generation/1: c")
			},
		},
		{
			Name:   "MarkIdleOnceRolledOut",
			Before: v1alpha1.StackRolloutStatus{Stable: rev1, Conditions: gen.Reconciling(v1alpha1.ReasonConverging, "converging")},
			Set: func(ro *v1alpha1.StackRollout) any {
				markIdle(ro, nil, 3)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Phase = v1alpha1.RolloutIdle
				st.Conditions = gen.Ready(v1alpha1.ReasonRolledOut, "3 Stack(s) at generation/1; no newer revision is offered")
			},
		},
		{
			Name: "RecordStartOpensTheFirstWaveAndForgetsTheLastRollout",
			Before: v1alpha1.StackRolloutStatus{
				Phase: v1alpha1.RolloutAborted, Stable: rev1, Aborted: rev2, ResumeTime: &earlier, CompletionTime: &earlier, FailedStacks: []string{"a"},
				Conditions: []metav1.Condition{gen.Condition(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonGateFailed, "stale")},
			},
			Set: func(ro *v1alpha1.StackRollout) any {
				recordStart(ro, rev2, []v1alpha1.RolloutWaveStatus{{Name: "0", Stacks: []string{"a"}, State: v1alpha1.WavePending}, {Name: "1", Stacks: []string{"b"}, State: v1alpha1.WavePending}}, testNow)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Phase, st.Target, st.StartTime, st.ResumeTime, st.CompletionTime, st.FailedStacks = v1alpha1.RolloutProgressing, rev2, &now, nil, nil, nil
				st.Waves = []v1alpha1.RolloutWaveStatus{{Name: "0", Stacks: []string{"a"}, State: v1alpha1.WaveUpdating}, {Name: "1", Stacks: []string{"b"}, State: v1alpha1.WavePending}}
				st.WaveName, st.Conditions = "0", nil
			},
		},
		{
			Name:   "RecordStartWithoutWaves",
			Before: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutIdle, Stable: rev1},
			Set: func(ro *v1alpha1.StackRollout) any {
				recordStart(ro, rev2, nil, testNow)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Phase, st.Target, st.StartTime = v1alpha1.RolloutProgressing, rev2, &now
			},
		},
		{
			Name: "MarkWaveUpdatingBakesAfresh",
			Before: func() v1alpha1.StackRolloutStatus {
				st := progressing()
				st.Waves[0].ReadyTime, st.Waves[0].State, st.Waves[0].Updated = &earlier, v1alpha1.WaveBaking, 0
				return st
			}(),
			Set: func(ro *v1alpha1.StackRollout) any {
				markWaveUpdating(ro)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Waves[0].ReadyTime, st.Waves[0].State = nil, v1alpha1.WaveUpdating
			},
		},
		{
			Name:   "RecordWaveReadyTheFirstTime",
			Before: progressing(),
			Set: func(ro *v1alpha1.StackRollout) any {
				return recordWaveReady(ro, testNow)
			},
			WantResult: true,
			Change:     func(st *v1alpha1.StackRolloutStatus) { st.Waves[0].ReadyTime = &now },
		},
		{
			Name: "RecordWaveReadyKeepsTheFirstTime",
			Before: func() v1alpha1.StackRolloutStatus {
				st := progressing()
				st.Waves[0].ReadyTime = &earlier
				return st
			}(),
			Set: func(ro *v1alpha1.StackRollout) any {
				return recordWaveReady(ro, testNow)
			},
			WantResult: false,
		},
		{
			Name:   "MarkWaveBaking",
			Before: progressing(),
			Set: func(ro *v1alpha1.StackRollout) any {
				markWaveBaking(ro, 90*time.Second+400*time.Millisecond)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Waves[0].State = v1alpha1.WaveBaking
				st.Conditions = gen.Reconciling(v1alpha1.ReasonWaveBaking, "wave 0 is Ready at generation/2 and bakes for 1m30s more")
			},
		},
		{
			Name: "MarkWaveGating",
			Before: func() v1alpha1.StackRolloutStatus {
				st := progressing()
				st.Waves[0].GateJob = "fleet-gate-0-abcd"
				return st
			}(),
			Set: func(ro *v1alpha1.StackRollout) any {
				markWaveGating(ro)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Waves[0].State = v1alpha1.WaveGating
				st.Conditions = gen.Reconciling(v1alpha1.ReasonWaveGating, "wave 0 is Ready at generation/2; its gate Job fleet-gate-0-abcd runs")
			},
		},
		{
			Name:   "EnterAwaitingPromotion",
			Before: progressing(),
			Set: func(ro *v1alpha1.StackRollout) any {
				return enterAwaitingPromotion(ro)
			},
			WantResult: true,
			Change:     func(st *v1alpha1.StackRolloutStatus) { st.Waves[0].State = v1alpha1.WaveAwaitingPromotion },
		},
		{
			Name: "EnterAwaitingPromotionWhenAwaitingAlready",
			Before: func() v1alpha1.StackRolloutStatus {
				st := progressing()
				st.Waves[0].State = v1alpha1.WaveAwaitingPromotion
				return st
			}(),
			Set: func(ro *v1alpha1.StackRollout) any {
				return enterAwaitingPromotion(ro)
			},
			WantResult: false,
		},
		{
			Name:   "MarkAwaitingPromotion",
			Before: progressing(),
			Set: func(ro *v1alpha1.StackRollout) any {
				markAwaitingPromotion(ro)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Conditions = gen.Reconciling(v1alpha1.ReasonAwaitingPromotion,
					"wave 0 passed its gates; promote it with `kubectl stackwright rollout promote fleet` or `kubectl annotate stackrollout fleet stackwright.dev/promote=$(date +%s) --overwrite`")
			},
		},
		{
			Name:   "RecordWavePassedOpensTheNext",
			Before: progressing(),
			Set: func(ro *v1alpha1.StackRollout) any {
				return recordWavePassed(ro).Name
			},
			WantResult: "1",
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Wave = 1
				st.Waves[0].State, st.Waves[1].State = v1alpha1.WaveDone, v1alpha1.WaveUpdating
			},
		},
		{
			Name:   "RecordHaltNamesTheFaults",
			Before: progressing(),
			Set: func(ro *v1alpha1.StackRollout) any {
				return recordHalt(ro, v1alpha1.ReasonStackUpdateFailed, []string{"Stack a failed to update to generation/2: boom"})
			},
			WantResult: haltMessage("Stack a failed to update to generation/2: boom"),
			Change: func(st *v1alpha1.StackRolloutStatus) {
				msg := haltMessage("Stack a failed to update to generation/2: boom")
				st.Phase, st.Waves[0].State = v1alpha1.RolloutHalted, v1alpha1.WaveFailed
				st.Conditions = append(gen.Stalled(v1alpha1.ReasonStackUpdateFailed, msg), gen.Condition(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonStackUpdateFailed, msg))
			},
		},
		{
			Name:   "RecordHaltNamesAtMostTenFaults",
			Before: progressing(),
			Set: func(ro *v1alpha1.StackRollout) any {
				var faults []string
				for i := range 12 {
					faults = append(faults, fmt.Sprintf("fault %d", i))
				}
				return recordHalt(ro, v1alpha1.ReasonStackStalled, faults)
			},
			WantResult: haltMessage("fault 0; fault 1; fault 2; fault 3; fault 4; fault 5; fault 6; fault 7; fault 8; fault 9"),
			Change: func(st *v1alpha1.StackRolloutStatus) {
				msg := haltMessage("fault 0; fault 1; fault 2; fault 3; fault 4; fault 5; fault 6; fault 7; fault 8; fault 9")
				st.Phase, st.Waves[0].State = v1alpha1.RolloutHalted, v1alpha1.WaveFailed
				st.Conditions = append(gen.Stalled(v1alpha1.ReasonStackStalled, msg), gen.Condition(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonStackStalled, msg))
			},
		},
		{
			Name: "RecordCompleteMakesTheTargetStable",
			Before: func() v1alpha1.StackRolloutStatus {
				st := progressing()
				st.Wave = 1
				return st
			}(),
			Set: func(ro *v1alpha1.StackRollout) any {
				recordComplete(ro, testNow)
				return nil
			},
			Change: func(st *v1alpha1.StackRolloutStatus) {
				st.Stable, st.Target, st.Phase, st.CompletionTime = rev2, nil, v1alpha1.RolloutIdle, &now
			},
		},
	}
	statustest.RunTransitions(t, tests,
		func(st v1alpha1.StackRolloutStatus) *v1alpha1.StackRollout {
			return &v1alpha1.StackRollout{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Generation: testGeneration}, Status: st}
		},
		func(ro *v1alpha1.StackRollout) v1alpha1.StackRolloutStatus { return ro.Status })
}

// haltMessage is what recordHalt records about the first wave of progressing.
func haltMessage(faults string) string {
	return "wave 0 failed at generation/2: " + faults + "; later waves keep their revision. Fix it and resume (`kubectl stackwright rollout resume fleet`), or abort (`kubectl stackwright rollout abort fleet`: the opened waves deploy generation/1 again)"
}

// The generation counts as observed only once the rollout is Ready or Stalled for it, and
// Reconciling is then cleared.
func TestStatus_FinalizeStatus_ObservesOnlyASettledGeneration(t *testing.T) {
	gen.RunFinalize(t, func(conds []metav1.Condition) (int64, []metav1.Condition) {
		ro := &v1alpha1.StackRollout{ObjectMeta: metav1.ObjectMeta{Generation: testGeneration}}
		ro.Status.ObservedGeneration, ro.Status.Conditions = 1, conds
		finalizeStatus(ro)
		return ro.Status.ObservedGeneration, ro.Status.Conditions
	})
}

func TestStatus_Names_NamesAtMostTen(t *testing.T) {
	tests := []struct {
		name string
		list []string
		want string
	}{
		{name: "None", want: ""},
		{name: "Few", list: []string{"a", "b"}, want: "a, b"},
		{name: "Ten", list: strings.Split("a b c d e f g h i j", " "), want: "a, b, c, d, e, f, g, h, i, j"},
		{name: "Twelve", list: strings.Split("a b c d e f g h i j k l", " "), want: "a, b, c, d, e, f, g, h, i, j and 2 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := names(tt.list); got != tt.want {
				t.Errorf("names() = %q; want %q", got, tt.want)
			}
		})
	}
}
