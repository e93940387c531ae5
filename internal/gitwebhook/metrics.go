package gitwebhook

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The values of the result label. The callers are unauthenticated until their proof is
// checked, so nothing they send becomes a label value: they cannot grow the series.
const (
	resultAccepted     = "accepted"
	resultIgnored      = "ignored"
	resultUnauthorized = "unauthorized"
	resultBadRequest   = "bad_request"
	resultNotFound     = "not_found"
	resultTooLarge     = "too_large"
	resultThrottled    = "throttled"
	resultError        = "error"
)

var requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "stackwright_git_webhook_requests_total",
	Help: "Requests to the git push webhook, by result (accepted, ignored, unauthorized, bad_request, not_found, too_large, throttled, error).",
}, []string{"result"})

// Registered here rather than in internal/metrics so that the series exist only in
// binaries that serve the webhook.
func init() {
	crmetrics.Registry.MustRegister(requests)
	// Every series at 0 from the start, so that a rate over a result never seen yet is 0
	// rather than absent.
	for _, r := range []string{resultAccepted, resultIgnored, resultUnauthorized, resultBadRequest, resultNotFound, resultTooLarge, resultThrottled, resultError} {
		requests.WithLabelValues(r)
	}
}
