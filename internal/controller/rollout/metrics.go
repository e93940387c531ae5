package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Metric gates (spec.gates.metrics) sample a PromQL instant query while a wave bakes. The
// samples are taken in Reconcile, at most one per gate and interval, each a single HTTP
// request bounded by queryTimeout; what they found (the last value, the consecutive
// successes and failures) is in the wave's status, so a restarted manager goes on counting
// where it was and never samples more often than the interval.

const (
	defaultInterval  = 30 * time.Second
	defaultSuccesses = 3
	defaultFailures  = 1
	queryTimeout     = 10 * time.Second
	// maxResponse bounds the body of a query response read.
	maxResponse = 1 << 20
)

// FlagMetricGateURLs names the manager's flag that lists the URL prefixes metric gates may
// query, and metricGateURLsValue the chart's value that sets it; messages name both.
const (
	FlagMetricGateURLs  = "metric-gate-urls"
	metricGateURLsValue = "rollouts.metricGateURLs"
)

// queryPath is where a Prometheus serves instant queries, under its URL.
const queryPath = "/api/v1/query"

// checkMetricGates stalls a rollout whose metric gate names a Prometheus the manager may not
// query (MetricGateURLs): a gate that can never sample would halt every wave at its bake,
// after the wave deployed, and the request is what the allow-list is for. So nothing more
// starts (no revision, wave or Stack; the Updates already running finish, as when paused)
// and no request is sent, until the spec or the allow-list changes; the rollout then goes on
// where it was. A halted rollout keeps its halt's reason: it moves nowhere until resumed,
// and is looked at again then.
func (r *Reconciler) checkMetricGates(_ context.Context, s *scope) (bool, error) {
	ro := s.ro
	if ro.Status.Phase == v1alpha1.RolloutHalted {
		return true, nil
	}
	var refused []string
	for _, g := range ro.Spec.Gates.Metrics {
		if !r.MetricGateURLs.AllowsString(queryURL(g.Prometheus.URL)) {
			refused = append(refused, fmt.Sprintf("metric gate %s may not query %s", g.Name, g.Prometheus.URL))
		}
	}
	if len(refused) == 0 {
		return true, nil
	}
	why := fmt.Sprintf("it is not under a URL prefix the manager's --%s allows (Helm: %s)", FlagMetricGateURLs, metricGateURLsValue)
	if r.MetricGateURLs.Len() == 0 {
		why = fmt.Sprintf("the manager's --%s is empty (Helm: %s), so metric gates may query no server", FlagMetricGateURLs, metricGateURLsValue)
	}
	if markMetricGateURLNotAllowed(ro, refused, why) {
		s.event(corev1.EventTypeWarning, EventMetricGateURLNotAllowed, "%s", conditions.Get(ro, pulumiv1.ConditionStalled).Message)
	}
	return false, nil
}

// queryURL is the URL of the instant query API of the Prometheus at base.
func queryURL(base string) string {
	return strings.TrimRight(base, "/") + queryPath
}

// httpClient is the client that queries the Prometheus servers: HTTPClient, whose redirects
// are followed only to where a metric gate may send a request itself.
func (r *Reconciler) httpClient() *http.Client {
	c := http.Client{}
	if r.HTTPClient != nil {
		c = *r.HTTPClient
	}
	next := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !r.MetricGateURLs.Allows(req.URL) {
			return fmt.Errorf("redirect to %s refused: it is not under a URL prefix --%s allows", req.URL.Redacted(), FlagMetricGateURLs)
		}
		if next != nil {
			return next(req, via)
		}
		// http.Client's own limit, which a CheckRedirect of its own replaces.
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

// sample is one evaluation of a gate's query: its values, or why there are none.
type sample struct {
	values []float64
	// err is why the query could not be made or read: the gate fails (a query that cannot
	// be made is a spec a person must fix, or a Prometheus that is down, which must not
	// pass a wave).
	err error
}

// sampleMetrics takes the samples of the current wave's metric gates that are due, and
// reports whether every gate has its consecutive successes; failure says which gate's
// consecutive failures halt the rollout. next is when the next sample is due.
func (r *Reconciler) sampleMetrics(ctx context.Context, s *scope) (passed bool, failure string, next time.Duration) {
	ro, st := s.ro, &s.ro.Status
	w := currentWave(ro)
	passed = true
	for _, g := range ro.Spec.Gates.Metrics {
		ms := metricStatus(w, g.Name)
		interval := metricInterval(&g)
		if due := ms.SampleTime == nil || !s.now.Before(ms.SampleTime.Add(interval)); due {
			q, err := renderQuery(g.Query, ro, w)
			smp := sample{err: err}
			if err == nil {
				smp = r.query(ctx, ro.Namespace, &g.Prometheus, q, s.now)
			}
			recordSample(ms, &g, smp, s.now)
		}
		if ms.Failures >= max(g.Failures, defaultFailures) {
			return false, fmt.Sprintf("metric gate %s failed %d time(s) in a row at %s (success: %s; last value: %s)", g.Name, ms.Failures, st.Target.Revision, g.SuccessCondition, ms.Value), 0
		}
		if ms.Successes < successesOf(&g) {
			passed = false
		}
		left := ms.SampleTime.Add(interval).Sub(s.now)
		if next == 0 || left < next {
			next = left
		}
	}
	return passed, "", next
}

// metricStatus is the wave's status of the named gate, added if missing.
func metricStatus(w *v1alpha1.RolloutWaveStatus, name string) *v1alpha1.RolloutMetricStatus {
	for i := range w.Metrics {
		if w.Metrics[i].Name == name {
			return &w.Metrics[i]
		}
	}
	w.Metrics = append(w.Metrics, v1alpha1.RolloutMetricStatus{Name: name})
	return &w.Metrics[len(w.Metrics)-1]
}

// recordSample records sample smp of gate g at now: a success adds to the successes and
// clears the failures, a failure the reverse, a sample without values clears the
// successes only.
func recordSample(ms *v1alpha1.RolloutMetricStatus, g *v1alpha1.RolloutMetricGate, smp sample, now time.Time) {
	t := metav1.NewTime(now)
	ms.SampleTime = &t
	switch ok, bad := judgeSample(g, smp); {
	case smp.err != nil:
		ms.Value = smp.err.Error()
		ms.Successes, ms.Failures = 0, ms.Failures+1
	case len(smp.values) == 0:
		ms.Value = "no data"
		ms.Successes = 0
	case bad:
		ms.Value = formatValues(smp.values)
		ms.Successes, ms.Failures = 0, ms.Failures+1
	case ok:
		ms.Value = formatValues(smp.values)
		ms.Successes, ms.Failures = ms.Successes+1, 0
	default:
		ms.Value = formatValues(smp.values)
		ms.Successes = 0
	}
}

// judgeSample tells whether a sample succeeds (every value meets the success condition)
// and whether it fails (a value meets the failure condition; without one, it does not
// succeed). A sample with no values does neither.
func judgeSample(g *v1alpha1.RolloutMetricGate, smp sample) (ok, bad bool) {
	if smp.err != nil || len(smp.values) == 0 {
		return false, false
	}
	ok = true
	for _, v := range smp.values {
		if !meets(g.SuccessCondition, v) {
			ok = false
		}
		if g.FailureCondition != "" && meets(g.FailureCondition, v) {
			bad = true
		}
	}
	if g.FailureCondition == "" {
		bad = !ok
	}
	return ok && !bad, bad
}

var conditionRe = regexp.MustCompile(`^\s*(<=|>=|==|!=|<|>)\s*(\S+)\s*$`)

// meets reports whether v meets cond ("< 0.05"); a condition admission let through but that
// does not parse is met by nothing.
func meets(cond string, v float64) bool {
	m := conditionRe.FindStringSubmatch(cond)
	if m == nil {
		return false
	}
	x, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		return false
	}
	switch m[1] {
	case "<":
		return v < x
	case "<=":
		return v <= x
	case ">":
		return v > x
	case ">=":
		return v >= x
	case "==":
		return v == x
	}
	return v != x
}

func formatValues(vs []float64) string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		parts = append(parts, strconv.FormatFloat(v, 'g', 6, 64))
	}
	return names(parts)
}

func metricInterval(g *v1alpha1.RolloutMetricGate) time.Duration {
	if g.Interval == nil || g.Interval.Duration <= 0 {
		return defaultInterval
	}
	return g.Interval.Duration
}

func successesOf(g *v1alpha1.RolloutMetricGate) int32 {
	if g.Successes < 1 {
		return defaultSuccesses
	}
	return g.Successes
}

// renderQuery fills the query's template variables from the rollout and wave.
func renderQuery(query string, ro *v1alpha1.StackRollout, w *v1alpha1.RolloutWaveStatus) (string, error) {
	t, err := template.New("query").Option("missingkey=error").Parse(query)
	if err != nil {
		return "", fmt.Errorf("failed to parse query: %w", err)
	}
	quoted := make([]string, 0, len(w.Stacks))
	for _, n := range w.Stacks {
		quoted = append(quoted, regexp.QuoteMeta(n))
	}
	var b strings.Builder
	err = t.Execute(&b, map[string]string{
		"Namespace": ro.Namespace, "Rollout": ro.Name, "Wave": w.Name,
		"Revision": ro.Status.Target.Revision, "Stacks": strings.Join(quoted, "|"),
	})
	if err != nil {
		return "", fmt.Errorf("failed to render query: %w", err)
	}
	return b.String(), nil
}

// query runs an instant query at now against the Prometheus p names, authenticated with
// its Secret, and returns the values of the result (a vector's samples, or a scalar).
func (r *Reconciler) query(ctx context.Context, ns string, p *v1alpha1.RolloutPrometheus, q string, now time.Time) sample {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	u := queryURL(p.URL) + "?" + url.Values{"query": {q}, "time": {strconv.FormatInt(now.Unix(), 10)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return sample{err: fmt.Errorf("failed to make query: %w", err)}
	}
	// checkMetricGates stalls such a rollout before it samples; this keeps any other way
	// here from sending the request.
	if !r.MetricGateURLs.Allows(req.URL) {
		return sample{err: fmt.Errorf("%s is not under a URL prefix --%s allows", p.URL, FlagMetricGateURLs)}
	}
	if ref := p.AuthSecretRef; ref != nil {
		sec := &corev1.Secret{}
		if err := r.apiReader().Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, sec); err != nil {
			return sample{err: fmt.Errorf("failed to get Secret %s (prometheus.authSecretRef): %w", ref.Name, err)}
		}
		switch {
		case len(sec.Data["token"]) > 0:
			req.Header.Set("Authorization", "Bearer "+string(sec.Data["token"]))
		case len(sec.Data["username"]) > 0:
			req.SetBasicAuth(string(sec.Data["username"]), string(sec.Data["password"]))
		default:
			return sample{err: fmt.Errorf("secret %s (prometheus.authSecretRef) has neither the key token nor username", ref.Name)}
		}
	}
	resp, err := r.httpClient().Do(req)
	if err != nil {
		return sample{err: fmt.Errorf("failed to query %s: %w", p.URL, err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return sample{err: fmt.Errorf("failed to read the response of %s: %w", p.URL, err)}
	}
	values, err := parseQueryResponse(resp.StatusCode, body)
	return sample{values: values, err: err}
}

// queryResponse is the JSON of the Prometheus HTTP API's instant query.
type queryResponse struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// parseQueryResponse reads the values of an instant query's response.
func parseQueryResponse(code int, body []byte) ([]float64, error) {
	var qr queryResponse
	if err := json.Unmarshal(body, &qr); err != nil {
		return nil, fmt.Errorf("failed to read the query response (HTTP %d): %w", code, err)
	}
	if qr.Status != "success" {
		return nil, fmt.Errorf("query failed (HTTP %d): %s", code, qr.Error)
	}
	var points [][2]any
	switch qr.Data.ResultType {
	case "scalar":
		var p [2]any
		if err := json.Unmarshal(qr.Data.Result, &p); err != nil {
			return nil, fmt.Errorf("failed to read the scalar result: %w", err)
		}
		points = append(points, p)
	case "vector":
		var vec []struct {
			Value [2]any `json:"value"`
		}
		if err := json.Unmarshal(qr.Data.Result, &vec); err != nil {
			return nil, fmt.Errorf("failed to read the vector result: %w", err)
		}
		for _, v := range vec {
			points = append(points, v.Value)
		}
	default:
		return nil, fmt.Errorf("the query returned a %s, not a vector or scalar", qr.Data.ResultType)
	}
	values := make([]float64, 0, len(points))
	for _, p := range points {
		str, _ := p[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("the query returned the value %q, not a number", str)
		}
		values = append(values, v)
	}
	return values, nil
}
