package rollout_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/rollout"
)

// prometheus serves the instant-query API as Prometheus does, at a URL the manager may
// query, answering every query with the error rate the test sets, to requests with the
// bearer token only.
func prometheus(t *testing.T, token string, errorRate *atomic.Value) string {
	return servePrometheus(t, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" || r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"status":"error","error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%d,%q]}]}}`, time.Now().Unix(), errorRate.Load().(string))
	}))
}

// A metric gate samples its query while each wave bakes: a healthy error rate passes each
// wave after its consecutive successes; an unhealthy one halts the rollout, naming the gate
// and its value.
func TestReconciler_Reconcile_MetricGate(t *testing.T) {
	t.Parallel()
	var rate atomic.Value
	rate.Store("0.01")
	url := prometheus(t, "s3cret", &rate)
	f := newFleet(t, [][]string{{"a"}, {"b"}, {"c"}}, v1alpha1.StackRolloutSpec{
		Waves: v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1", "2"}}},
		Gates: v1alpha1.RolloutGates{Metrics: []v1alpha1.RolloutMetricGate{{
			Name:             "errors",
			Prometheus:       v1alpha1.RolloutPrometheus{URL: url, AuthSecretRef: &corev1.LocalObjectReference{Name: "prom"}},
			Query:            `sum(rate(http_errors{stack=~"{{.Stacks}}"}[1m]))`,
			SuccessCondition: "< 0.05",
			Interval:         &metav1.Duration{Duration: 500 * time.Millisecond},
			Successes:        2,
			Failures:         2,
		}}},
	})
	f.Create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "prom"}, StringData: map[string]string{"token": "s3cret"}})
	f.settle()
	f.offer("generation/2")
	f.deploy("generation/2", "a")
	f.Eventually(func(g Gomega) {
		ro := f.rollout(g)
		g.Expect(opened(ro, "b")).To(Equal([]string{"b"}), "wave 0 passed its metric gate")
		g.Expect(ro.Status.Waves[0].Metrics).To(ConsistOf(HaveField("Successes", BeNumerically(">=", 2))))
	})

	rate.Store("0.5")
	f.deploy("generation/2", "b")
	ro := f.waitCondition(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonMetricGateFailed)
	f.g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted).Message).To(ContainSubstring(
		"metric gate errors failed 2 time(s) in a row at generation/2 (success: < 0.05; last value: 0.5)"))
	f.g.Expect(ro.Status.Waves[1].State).To(Equal(v1alpha1.WaveFailed))
	f.g.Expect(opened(ro, "c")).To(BeEmpty())

	// Healthy again, a resume samples afresh and the rollout completes.
	rate.Store("0")
	f.annotate(v1alpha1.RolloutResumeAnnotation)
	f.Eventually(func(g Gomega) { g.Expect(opened(f.rollout(g), "c")).To(Equal([]string{"c"})) })
	f.deploy("generation/2", "c")
	f.waitCondition(pulumiv1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
}

// A metric gate whose Prometheus is outside the manager's allow-list (--metric-gate-urls)
// gets no request, whether it is another server, another path of an allowed one, or a path
// that climbs out of the allowed one: the rollout stalls naming each gate's URL and the
// flag, and starts no revision. Once the spec names an allowed Prometheus, the rollout
// goes on.
func TestReconciler_Reconcile_MetricGateURLNotAllowed(t *testing.T) {
	t.Parallel()
	var refused atomic.Int32
	count := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { refused.Add(1) })
	other := httptest.NewServer(count)
	t.Cleanup(other.Close)
	deniedPath := servePrometheus(t, false, count)
	climbing := prom.URL + "/allowed/../" + strings.TrimPrefix(deniedPath, prom.URL+"/")
	gate := func(name, url string) v1alpha1.RolloutMetricGate {
		return v1alpha1.RolloutMetricGate{Name: name, Prometheus: v1alpha1.RolloutPrometheus{URL: url}, Query: "up", SuccessCondition: "< 1",
			Interval: &metav1.Duration{Duration: 200 * time.Millisecond}, Successes: 1}
	}
	f := newFleet(t, [][]string{{"a"}, {"b"}}, v1alpha1.StackRolloutSpec{
		Waves: v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1"}}},
		Gates: v1alpha1.RolloutGates{Metrics: []v1alpha1.RolloutMetricGate{
			gate("other-server", other.URL), gate("other-path", deniedPath), gate("climbing", climbing),
		}},
	})
	f.offer("generation/1")
	ro := f.waitCondition(pulumiv1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonMetricGateURLNotAllowed)
	msg := apimeta.FindStatusCondition(ro.Status.Conditions, pulumiv1.ConditionStalled).Message
	for _, want := range []string{
		"metric gate other-server may not query " + other.URL, "metric gate other-path may not query " + deniedPath,
		"metric gate climbing may not query " + climbing, "--metric-gate-urls allows (Helm: rollouts.metricGateURLs)", "No request is sent",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Stalled message %q does not say %q", msg, want)
		}
	}
	f.Eventually(func(g Gomega) {
		g.Expect(recorder.Reasons(f.Namespace, "fleet")).To(ContainElement(rollout.EventMetricGateURLNotAllowed))
	})

	// A new revision is offered: the stalled rollout starts nothing, and so asks nothing.
	f.offer("generation/2")
	time.Sleep(2 * time.Second)
	ro = f.rollout(f.g)
	if ro.Status.Target != nil || opened(ro, "a", "b") != nil {
		t.Errorf("the stalled rollout started %v, opening %v", ro.Status.Target, opened(ro, "a", "b"))
	}

	// Fixed: the gate names an allowed Prometheus, and the rollout goes on.
	var queried atomic.Int32
	allowed := servePrometheus(t, true, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		queried.Add(1)
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"scalar","result":[1,"0"]}}`)
	}))
	f.Patch(ro, func() { ro.Spec.Gates.Metrics = []v1alpha1.RolloutMetricGate{gate("healthy", allowed)} })
	f.Eventually(func(g Gomega) { g.Expect(opened(f.rollout(g), "a")).To(Equal([]string{"a"})) })
	f.deploy("generation/2", "a")
	f.Eventually(func(g Gomega) {
		g.Expect(opened(f.rollout(g), "b")).To(Equal([]string{"b"}), "wave 0 passed its metric gate")
	})
	if queried.Load() == 0 {
		t.Error("the allowed Prometheus was never queried")
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("the Prometheus servers outside the allow-list got %d request(s)", n)
	}
}
