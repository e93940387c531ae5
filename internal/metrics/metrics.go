package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Drift check results, the values of the result label.
const (
	DriftFound  = "drift"
	DriftNone   = "no_drift"
	DriftFailed = "failed"
)

const (
	labelNS      = "namespace"
	labelStack   = "stack"
	labelResult  = "result"
	metricPrefix = "stackwright_"
)

var (
	driftChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "drift_checks_total",
		Help: "Scheduled drift checks finished, by namespace and result (drift, no_drift, failed).",
	}, []string{labelNS, labelResult})

	driftDetected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricPrefix + "stack_drift_detected",
		Help: "1 when the Stack's last drift check found drift, 0 when it found none; absent before the first check and when it could not run.",
	}, []string{labelNS, labelStack})
)

func init() {
	crmetrics.Registry.MustRegister(driftChecks, driftDetected)
}

// ObserveDriftCheck records a finished drift check of a Stack with its result.
func ObserveDriftCheck(namespace, stack, result string) {
	driftChecks.WithLabelValues(namespace, result).Inc()
	switch result {
	case DriftFound:
		driftDetected.WithLabelValues(namespace, stack).Set(1)
	case DriftNone:
		driftDetected.WithLabelValues(namespace, stack).Set(0)
	default:
		driftDetected.DeleteLabelValues(namespace, stack)
	}
}

// ForgetStack drops the per-Stack series of a Stack that no longer exists.
func ForgetStack(namespace, stack string) {
	driftDetected.DeleteLabelValues(namespace, stack)
}
