package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

func stackWith(ns, name string, suspend bool, conds ...string) *pulumiv1.Stack {
	s := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if suspend {
		s.Spec.Stackwright = &pulumiv1.StackwrightSpec{Suspend: true}
	}
	for _, c := range conds {
		s.Status.Conditions = append(s.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue})
	}
	return s
}

func TestStackStates_Conditions(t *testing.T) {
	tests := []struct {
		name  string
		stack *pulumiv1.Stack
		want  []string
	}{
		{"newStackHasNoState", stackWith("a", "s", false), nil},
		{"readyWithDrift", stackWith("a", "s", false, pulumiv1.ConditionReady, pulumiv1.ConditionDriftDetected), []string{StateReady, StateDriftDetected}},
		{"reconciling", stackWith("a", "s", false, pulumiv1.ConditionReconciling), []string{StateReconciling}},
		{"stalledAndSuspended", stackWith("a", "s", true, pulumiv1.ConditionStalled), []string{StateStalled, StateSuspended}},
		{"falseConditionsDoNotCount", func() *pulumiv1.Stack {
			s := stackWith("a", "s", false)
			s.Status.Conditions = []metav1.Condition{{Type: pulumiv1.ConditionReady, Status: metav1.ConditionFalse}}
			return s
		}(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, StackStates(tt.stack)); diff != "" {
				t.Errorf("StackStates (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStackCollector_Collect_CountsByNamespaceAndState(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{pulumiv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	done := stackWith("a", "done", false, pulumiv1.ConditionReady)
	done.Status.Stackwright = &pulumiv1.StackwrightStatus{LastSuccessTime: &metav1.Time{Time: time.Unix(1700000000, 0)}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		done,
		stackWith("a", "stuck", false, pulumiv1.ConditionStalled),
		stackWith("b", "busy", false, pulumiv1.ConditionReconciling),
		&v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "review"}, Status: v1alpha1.StackSetStatus{
			Elements: 3, Stacks: 2, Ready: 1, Failing: 1, Expired: []v1alpha1.ExpiredElement{{Element: "feature/x"}},
		}},
	).Build()
	col := &stackCollector{reader: c}
	want := `
# HELP stackwright_stack_last_success_timestamp_seconds When the Stack's last successful update finished, in Unix seconds; absent before the first one.
# TYPE stackwright_stack_last_success_timestamp_seconds gauge
stackwright_stack_last_success_timestamp_seconds{namespace="a",stack="done"} 1.7e+09
# HELP stackwright_stackset_stacks A StackSet's elements and Stacks, by count: elements (generated), stacks (owned), ready, failing (Stalled or last update failed), expired (elements whose Stack's TTL expired).
# TYPE stackwright_stackset_stacks gauge
stackwright_stackset_stacks{count="elements",namespace="a",stackset="review"} 3
stackwright_stackset_stacks{count="expired",namespace="a",stackset="review"} 1
stackwright_stackset_stacks{count="failing",namespace="a",stackset="review"} 1
stackwright_stackset_stacks{count="ready",namespace="a",stackset="review"} 1
stackwright_stackset_stacks{count="stacks",namespace="a",stackset="review"} 2
# HELP stackwright_stacks Stacks by namespace and state (ready, reconciling, stalled, suspended, drift_detected); a Stack counts in every state whose condition is True.
# TYPE stackwright_stacks gauge
stackwright_stacks{namespace="a",state="drift_detected"} 0
stackwright_stacks{namespace="a",state="ready"} 1
stackwright_stacks{namespace="a",state="reconciling"} 0
stackwright_stacks{namespace="a",state="stalled"} 1
stackwright_stacks{namespace="a",state="suspended"} 0
stackwright_stacks{namespace="b",state="drift_detected"} 0
stackwright_stacks{namespace="b",state="ready"} 0
stackwright_stacks{namespace="b",state="reconciling"} 1
stackwright_stacks{namespace="b",state="stalled"} 0
stackwright_stacks{namespace="b",state="suspended"} 0
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	SetPerStackLabels(false)
	t.Cleanup(func() { SetPerStackLabels(true) })
	for _, name := range []string{"stackwright_stack_last_success_timestamp_seconds", "stackwright_stackset_stacks"} {
		if n := testutil.CollectAndCount(col, name); n != 0 {
			t.Errorf("with per-Stack labels off, %d %s series are reported; want none", n, name)
		}
	}
}

func TestObserveUpdate_CountsAndTimes(t *testing.T) {
	ObserveUpdate("ns-upd", "up", "succeeded", "Succeeded", 3*time.Second)
	ObserveUpdate("ns-upd", "up", "failed", "PermanentFailure", 0)
	if got := testutil.ToFloat64(updates.WithLabelValues("ns-upd", "up", "succeeded")); got != 1 {
		t.Errorf("updates_total{succeeded} = %v; want 1", got)
	}
	if got := testutil.ToFloat64(updates.WithLabelValues("ns-upd", "up", "failed")); got != 1 {
		t.Errorf("updates_total{failed} = %v; want 1", got)
	}
	// A run without a known duration is counted, not timed.
	if n := series(t, updateDuration, map[string]string{labelNS: "ns-upd", labelResult: "succeeded"}); n != 1 {
		t.Errorf("update_duration_seconds has %d series of the succeeded run; want 1", n)
	}
	if n := series(t, updateDuration, map[string]string{labelNS: "ns-upd", labelResult: "failed"}); n != 0 {
		t.Errorf("update_duration_seconds has %d series of the run without a duration; want 0", n)
	}
}

// series counts c's series whose labels include want.
func series(t *testing.T, c prometheus.Collector, want map[string]string) int {
	t.Helper()
	ch := make(chan prometheus.Metric, 256)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatalf("failed to read metric: %v", err)
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if match {
			n++
		}
	}
	return n
}

func TestObserveSourceResolve_ErrorsByReason(t *testing.T) {
	ObserveSourceResolve("Git", time.Second, "")
	ObserveSourceResolve("Git", time.Second, "SourceUnavailable")
	if got := testutil.ToFloat64(sourceErrors.WithLabelValues("Git", "SourceUnavailable")); got != 1 {
		t.Errorf("source_resolve_errors_total = %v; want 1", got)
	}
}
