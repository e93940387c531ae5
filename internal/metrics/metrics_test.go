package metrics

import (
	"testing"

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
