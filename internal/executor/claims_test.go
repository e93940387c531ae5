package executor

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

func update(phase v1alpha1.UpdatePhase, runner string) *v1alpha1.Update {
	u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "u"}}
	u.Status.Phase, u.Status.Runner = phase, runner
	return u
}

// claimAnswering is a ClaimFunc giving the answers in order, counting its calls.
func claimAnswering(calls *int, answers ...func() (bool, error)) ClaimFunc {
	return func(context.Context, *v1alpha1.Update, string) (bool, error) {
		*calls++
		return answers[*calls-1]()
	}
}

var (
	won      = func() (bool, error) { return true, nil }
	refused  = func() (bool, error) { return false, nil }
	noAnswer = func() (bool, error) { return false, errors.New("connection reset by peer") }
	stale    = func() (bool, error) { return false, ErrStaleRead }
)

func TestClaims_Claim_SettlesLostAnswers(t *testing.T) {
	const me = "local/pod/1/abc"
	tests := []struct {
		name string
		// lostFirst: a first claim of the Update got no answer.
		lostFirst bool
		seen      *v1alpha1.Update
		answer    func() (bool, error)
		want      bool
		wantErr   error
		wantCalls int
	}{
		{name: "pendingClaimed", seen: update(v1alpha1.UpdatePhasePending, ""), answer: won, want: true, wantCalls: 1},
		{name: "takenByAnother", seen: update(v1alpha1.UpdatePhaseRunning, "job/x"), answer: refused, wantCalls: 1},
		{name: "runningUnderMeWithoutALostClaimIsNotTaken", seen: update(v1alpha1.UpdatePhaseRunning, me), answer: refused, wantCalls: 1},
		{name: "lostClaimWasAppliedIsMine", lostFirst: true, seen: update(v1alpha1.UpdatePhaseRunning, me), want: true, wantCalls: 1},
		{name: "lostClaimNotAppliedClaimedAgain", lostFirst: true, seen: update(v1alpha1.UpdatePhasePending, ""), answer: won, want: true, wantCalls: 2},
		{name: "lostClaimAndAStaleReadIsUnsettled", lostFirst: true, seen: update(v1alpha1.UpdatePhasePending, ""), answer: refused, wantErr: errUnsettled, wantCalls: 2},
		{name: "lostClaimThenTakenByAnother", lostFirst: true, seen: update(v1alpha1.UpdatePhaseRunning, "local/pod/2/def"), answer: refused, wantCalls: 2},
		{name: "staleReadIsRetriedNotLost", seen: update(v1alpha1.UpdatePhasePending, ""), answer: stale, wantErr: ErrStaleRead, wantCalls: 1},
		{name: "lostClaimThenFinished", lostFirst: true, seen: update(v1alpha1.UpdatePhaseSucceeded, me), answer: refused, wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Claims
			calls := 0
			answers := []func() (bool, error){}
			if tt.lostFirst {
				answers = append(answers, noAnswer)
			}
			if tt.answer != nil {
				answers = append(answers, tt.answer)
			}
			claim := claimAnswering(&calls, answers...)
			if tt.lostFirst {
				if _, err := c.Claim(t.Context(), update(v1alpha1.UpdatePhasePending, ""), me, claim); err == nil {
					t.Fatal("the lost claim reported no error")
				}
			}
			got, err := c.Claim(t.Context(), tt.seen, me, claim)
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Errorf("Claim = %v, %v; want %v, %v", got, err, tt.want, tt.wantErr)
			}
			if calls != tt.wantCalls {
				t.Errorf("%d claims made; want %d", calls, tt.wantCalls)
			}
			if (tt.wantErr == nil || errors.Is(tt.wantErr, ErrStaleRead)) && len(c.lost) != 0 {
				t.Errorf("settled claims still remembered: %v", c.lost)
			}
		})
	}
}
