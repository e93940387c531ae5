package rollout_test

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Admission refuses waves that cannot be planned, and says why.
func TestStackRollout_Admission_Waves(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	step := func(v intstr.IntOrString) v1alpha1.RolloutStep { return v1alpha1.RolloutStep{Stacks: v} }
	byLabel := &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0"}}
	tests := []struct {
		name  string
		waves v1alpha1.RolloutWaves
		want  string
	}{
		{name: "CountsAndPercentages", waves: v1alpha1.RolloutWaves{Steps: []v1alpha1.RolloutStep{step(intstr.FromInt32(1)), step(intstr.FromString("25%")), step(intstr.FromString("100%"))}}},
		{name: "ByLabel", waves: v1alpha1.RolloutWaves{ByLabel: byLabel}},
		{name: "NotAPercentage", waves: v1alpha1.RolloutWaves{Steps: []v1alpha1.RolloutStep{step(intstr.FromString("half"))}}, want: "a count (0 or more) or a percentage"},
		{name: "AboveAHundredPercent", waves: v1alpha1.RolloutWaves{Steps: []v1alpha1.RolloutStep{step(intstr.FromString("150%"))}}, want: "a count (0 or more) or a percentage"},
		{name: "NegativeCount", waves: v1alpha1.RolloutWaves{Steps: []v1alpha1.RolloutStep{step(intstr.FromInt32(-1))}}, want: "a count (0 or more) or a percentage"},
		{name: "BothKinds", waves: v1alpha1.RolloutWaves{ByLabel: byLabel, Steps: []v1alpha1.RolloutStep{step(intstr.FromInt32(1))}}, want: "set exactly one of byLabel and steps"},
		{name: "Neither", waves: v1alpha1.RolloutWaves{}, want: "set exactly one of byLabel and steps"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ro := &v1alpha1.StackRollout{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("r%d", i)},
				Spec:       v1alpha1.StackRolloutSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, Waves: tt.waves},
			}
			err := env.Client.Create(t.Context(), ro)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// Admission takes maxParallel as a count or a percentage, for the rollout and per wave;
// 0 holds a wave but means "the whole wave" for the rollout, so "0%" is the wave's only.
func TestStackRollout_Admission_Pace(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	count, pct := intstr.FromInt32, intstr.FromString
	tests := []struct {
		name          string
		rollout, wave *intstr.IntOrString
		want          string
	}{
		{name: "Unset"},
		{name: "CountAsBefore", rollout: new(count(2))},
		{name: "RolloutZero", rollout: new(count(0))},
		{name: "RolloutPercentage", rollout: new(pct("25%"))},
		{name: "RolloutZeroPercent", rollout: new(pct("0%")), want: "a percentage from 1% to 100%"},
		{name: "RolloutNegative", rollout: new(count(-1)), want: "a count (0 or more)"},
		{name: "WaveZeroHolds", wave: new(count(0))},
		{name: "WaveZeroPercentHolds", wave: new(pct("0%"))},
		{name: "WaveNotAPercentage", wave: new(pct("all")), want: "a percentage from 0% to 100%"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ro := &v1alpha1.StackRollout{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p%d", i)},
				Spec: v1alpha1.StackRolloutSpec{
					Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
					Waves:       v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0"}}, Pace: []v1alpha1.RolloutWavePace{{Wave: "0", MaxParallel: tt.wave}}},
					MaxParallel: tt.rollout,
				},
			}
			err := env.Client.Create(t.Context(), ro)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error saying %q", err, tt.want)
			}
		})
	}
}
