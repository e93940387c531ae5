package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Stack states, the values of stackwright_stacks' state label. A Stack counts in every
// state that holds for it: Ready and drift_detected, say.
const (
	StateReady         = "ready"
	StateReconciling   = "reconciling"
	StateStalled       = "stalled"
	StateSuspended     = "suspended"
	StateDriftDetected = "drift_detected"
)

// states in the order they are reported.
var states = []string{StateReady, StateReconciling, StateStalled, StateSuspended, StateDriftDetected}

var (
	stacksDesc = prometheus.NewDesc(metricPrefix+"stacks",
		"Stacks by namespace and state (ready, reconciling, stalled, suspended, drift_detected); a Stack counts in every state whose condition is True.",
		[]string{labelNS, labelState}, nil)
	lastSuccessDesc = prometheus.NewDesc(metricPrefix+"stack_last_success_timestamp_seconds",
		"When the Stack's last successful update finished, in Unix seconds; absent before the first one.",
		[]string{labelNS, labelStack}, nil)
	stackSetDesc = prometheus.NewDesc(metricPrefix+"stackset_stacks",
		"A StackSet's elements and Stacks, by count: elements (generated), stacks (owned), ready, failing (Stalled or last update failed), expired (elements whose Stack's TTL expired).",
		[]string{labelNS, labelStackSet, labelCount}, nil)
	queuedDesc = prometheus.NewDesc(metricPrefix+"executor_queued_updates",
		"Updates waiting for a runner, by executor.", []string{labelExecutor}, nil)
	runningDesc = prometheus.NewDesc(metricPrefix+"executor_running_updates",
		"Updates running, by executor.", []string{labelExecutor}, nil)
)

// listTimeout bounds a scrape's read of the Stacks (from the manager's cache).
const listTimeout = 10 * time.Second

// stackCollector computes the Stack gauges at scrape time from the manager's cache, so
// that they cannot drift from the Stacks' conditions and cost nothing between scrapes.
type stackCollector struct {
	reader client.Reader
}

// RegisterStackCollector reports stackwright_stacks and, with per-Stack labels on,
// stackwright_stack_last_success_timestamp_seconds from the Stacks reader lists. A later
// call replaces the earlier collector (a manager started again in the same process).
func RegisterStackCollector(reader client.Reader) error {
	return register("stacks", &stackCollector{reader: reader})
}

var (
	regMu      sync.Mutex
	registered = map[string]prometheus.Collector{}
)

func register(key string, c prometheus.Collector) error {
	regMu.Lock()
	defer regMu.Unlock()
	if old, ok := registered[key]; ok {
		crmetrics.Registry.Unregister(old)
	}
	if err := crmetrics.Registry.Register(c); err != nil {
		return fmt.Errorf("failed to register metrics of %s: %w", key, err)
	}
	registered[key] = c
	return nil
}

func (c *stackCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- stacksDesc
	ch <- lastSuccessDesc
	ch <- stackSetDesc
}

func (c *stackCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	list := &pulumiv1.StackList{}
	if err := c.reader.List(ctx, list); err != nil {
		ch <- prometheus.NewInvalidMetric(stacksDesc, err)
		return
	}
	counts := map[string]map[string]int{}
	per := perStack.Load()
	for i := range list.Items {
		s := &list.Items[i]
		if counts[s.Namespace] == nil {
			counts[s.Namespace] = map[string]int{}
		}
		for _, st := range StackStates(s) {
			counts[s.Namespace][st]++
		}
		if sw := s.Status.Stackwright; per && sw != nil && sw.LastSuccessTime != nil {
			ch <- prometheus.MustNewConstMetric(lastSuccessDesc, prometheus.GaugeValue,
				float64(sw.LastSuccessTime.UnixNano())/1e9, s.Namespace, s.Name)
		}
	}
	for ns, byState := range counts {
		for _, st := range states {
			ch <- prometheus.MustNewConstMetric(stacksDesc, prometheus.GaugeValue, float64(byState[st]), ns, st)
		}
	}
	if per {
		c.collectStackSets(ctx, ch)
	}
}

// collectStackSets reports each StackSet's counts from its status (per-Stack labels only:
// a set is named like a Stack).
func (c *stackCollector) collectStackSets(ctx context.Context, ch chan<- prometheus.Metric) {
	sets := &v1alpha1.StackSetList{}
	if err := c.reader.List(ctx, sets); err != nil {
		ch <- prometheus.NewInvalidMetric(stackSetDesc, err)
		return
	}
	for _, set := range sets.Items {
		st := set.Status
		for count, v := range map[string]int{
			"elements": int(st.Elements), "stacks": int(st.Stacks), "ready": int(st.Ready), "failing": int(st.Failing), "expired": len(st.Expired),
		} {
			ch <- prometheus.MustNewConstMetric(stackSetDesc, prometheus.GaugeValue, float64(v), set.Namespace, set.Name, count)
		}
	}
}

// StackStates are the states a Stack counts in.
func StackStates(s *pulumiv1.Stack) []string {
	var out []string
	isTrue := func(t string) bool {
		return apimeta.IsStatusConditionPresentAndEqual(s.Status.Conditions, t, metav1.ConditionTrue)
	}
	if isTrue(pulumiv1.ConditionReady) {
		out = append(out, StateReady)
	}
	if isTrue(pulumiv1.ConditionReconciling) {
		out = append(out, StateReconciling)
	}
	if isTrue(pulumiv1.ConditionStalled) {
		out = append(out, StateStalled)
	}
	if sw := s.Spec.Stackwright; sw != nil && sw.Suspend {
		out = append(out, StateSuspended)
	}
	if isTrue(pulumiv1.ConditionDriftDetected) {
		out = append(out, StateDriftDetected)
	}
	return out
}

// executorCollector reports an executor's queue at scrape time.
type executorCollector struct {
	name    string
	pending func() (queued, running int)
}

// RegisterExecutor reports stackwright_executor_queued_updates and
// stackwright_executor_running_updates of the named executor ("local", "job").
func RegisterExecutor(name string, pending func() (queued, running int)) error {
	return register("executor "+name, &executorCollector{name: name, pending: pending})
}

func (c *executorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queuedDesc
	ch <- runningDesc
}

func (c *executorCollector) Collect(ch chan<- prometheus.Metric) {
	q, r := c.pending()
	ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(q), c.name)
	ch <- prometheus.MustNewConstMetric(runningDesc, prometheus.GaugeValue, float64(r), c.name)
}
