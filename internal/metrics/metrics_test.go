package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

func TestObserveDriftCheck_Results(t *testing.T) {
	cases := []struct {
		name      string
		results   []string
		wantDrift float64 // -1: no series
	}{
		{name: "driftSetsGauge", results: []string{DriftFound}, wantDrift: 1},
		{name: "cleanCheckClearsGauge", results: []string{DriftFound, DriftNone}, wantDrift: 0},
		{name: "failedCheckDropsGauge", results: []string{DriftFound, DriftFailed}, wantDrift: -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns, stack := "ns-"+tc.name, "s"
			for _, r := range tc.results {
				ObserveDriftCheck(ns, stack, r)
			}
			for _, r := range []string{DriftFound, DriftNone, DriftFailed} {
				want := 0.0
				for _, got := range tc.results {
					if got == r {
						want++
					}
				}
				if got := testutil.ToFloat64(driftChecks.WithLabelValues(ns, r)); got != want {
					t.Errorf("drift_checks_total{result=%q} = %v, want %v", r, got, want)
				}
			}
			got, present := driftGauge(t, ns, stack)
			switch {
			case tc.wantDrift < 0 && present:
				t.Errorf("stack_drift_detected = %v after a failed check, want no series", got)
			case tc.wantDrift >= 0 && (!present || got != tc.wantDrift):
				t.Errorf("stack_drift_detected = %v (reported: %v), want %v", got, present, tc.wantDrift)
			}
		})
	}
}

func TestForgetStack_DropsSeries(t *testing.T) {
	ObserveDriftCheck("ns-forget", "s", DriftFound)
	ForgetStack("ns-forget", "s")
	if _, present := driftGauge(t, "ns-forget", "s"); present {
		t.Errorf("stack_drift_detected of a forgotten Stack is still reported")
	}
}

// driftGauge reads the stack_drift_detected series of one Stack, if there is one.
func driftGauge(t *testing.T, namespace, stack string) (float64, bool) {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { driftDetected.Collect(ch); close(ch) }()
	var value float64
	var found bool
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatalf("failed to read metric: %v", err)
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels[labelNS] == namespace && labels[labelStack] == stack {
			value, found = d.GetGauge().GetValue(), true
		}
	}
	return value, found
}

// A finished Update that did not succeed is counted by the reason of its Complete
// condition, one of the constant reasons (any other is Other), and a lost runner by its
// lost reason: no label ever carries what a status writer made up.
func TestObserveUpdate_Failures_CountedByBoundedReason(t *testing.T) {
	type finished struct{ result, reason string }
	tests := []struct {
		name string
		runs []finished
		lost []string
		// want is update_failures_total by reason, wantLost runners_lost_total by reason.
		want, wantLost map[string]float64
	}{
		{
			name: "successIsNotAFailure",
			runs: []finished{{"succeeded", "Succeeded"}, {"succeeded", "Recovered"}},
			want: map[string]float64{},
		},
		{
			name: "failuresByReason",
			runs: []finished{{"failed", "OOMKilled"}, {"failed", "OOMKilled"}, {"failed", "PermanentFailure"}, {"cancelled", "Cancelled"}},
			want: map[string]float64{"OOMKilled": 2, "PermanentFailure": 1, "Cancelled": 1},
		},
		{
			name:     "lostRunnersByReason",
			runs:     []finished{{"failed", "OOMKilled"}, {"failed", "Evicted"}, {"failed", "RunnerLost"}},
			lost:     []string{"OOMKilled", "Evicted", "RunnerLost"},
			want:     map[string]float64{"OOMKilled": 1, "Evicted": 1, "RunnerLost": 1},
			wantLost: map[string]float64{"OOMKilled": 1, "Evicted": 1, "RunnerLost": 1},
		},
		{
			name:     "unknownReasonsAreOther",
			runs:     []finished{{"failed", "my tenant's text"}, {"failed", ""}},
			lost:     []string{"my tenant's text"},
			want:     map[string]float64{"Other": 2},
			wantLost: map[string]float64{"RunnerLost": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := "ns-failures-" + tt.name
			for _, r := range tt.runs {
				ObserveUpdate(ns, "up", r.result, r.reason, 0)
			}
			for _, r := range tt.lost {
				ObserveRunnerLost(ns, r)
			}
			if diff := cmp.Diff(tt.want, byReason(t, updateFailures, ns), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("update_failures_total (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantLost, byReason(t, runnersLost, ns), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("runners_lost_total (-want +got):\n%s", diff)
			}
		})
	}
}

// byReason reads the series of c in namespace by their reason label.
func byReason(t *testing.T, c prometheus.Collector, namespace string) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	out := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels[labelNS] == namespace {
			out[labels[labelReason]] += d.GetCounter().GetValue()
		}
	}
	return out
}
