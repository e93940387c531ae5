package rollout_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// prometheus serves the instant-query API as Prometheus does, answering every query with
// the error rate the test sets, to requests with the bearer token only.
func prometheus(t *testing.T, token string, errorRate *atomic.Value) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" || r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"status":"error","error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%d,%q]}]}}`, time.Now().Unix(), errorRate.Load().(string))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A metric gate samples its query while each wave bakes: a healthy error rate passes each
// wave after its consecutive successes; an unhealthy one halts the rollout, naming the gate
// and its value.
func TestReconciler_Reconcile_MetricGate(t *testing.T) {
	t.Parallel()
	var rate atomic.Value
	rate.Store("0.01")
	srv := prometheus(t, "s3cret", &rate)
	f := newFleet(t, [][]string{{"a"}, {"b"}, {"c"}}, v1alpha1.StackRolloutSpec{
		Waves: v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1", "2"}}},
		Gates: v1alpha1.RolloutGates{Metrics: []v1alpha1.RolloutMetricGate{{
			Name:             "errors",
			Prometheus:       v1alpha1.RolloutPrometheus{URL: srv.URL, AuthSecretRef: &corev1.LocalObjectReference{Name: "prom"}},
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
