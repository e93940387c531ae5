package rollout

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/urlallow"
)

// allow is the allow-list of prefixes.
func allow(t *testing.T, prefixes ...string) urlallow.List {
	t.Helper()
	l, err := urlallow.Parse(prefixes)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestParseQueryResponse_Values(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []float64
		wantErr string
	}{
		{name: "Vector", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"0.5"]},{"metric":{},"value":[1,"2"]}]}}`, want: []float64{0.5, 2}},
		{name: "EmptyVector", body: `{"status":"success","data":{"resultType":"vector","result":[]}}`, want: []float64{}},
		{name: "Scalar", body: `{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}`, want: []float64{1}},
		{name: "Matrix", body: `{"status":"success","data":{"resultType":"matrix","result":[]}}`, wantErr: "the query returned a matrix, not a vector or scalar"},
		{name: "Error", body: `{"status":"error","error":"parse error"}`, wantErr: "query failed (HTTP 200): parse error"},
		{name: "NotJSON", body: `<html>`, wantErr: "failed to read the query response (HTTP 200)"},
		{name: "NaN", body: `{"status":"success","data":{"resultType":"scalar","result":[1,"x"]}}`, wantErr: `the query returned the value "x", not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseQueryResponse(200, []byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordSample_ConsecutiveSuccessesAndFailures(t *testing.T) {
	ok := &v1alpha1.RolloutMetricGate{SuccessCondition: "< 0.05"}
	withFailure := &v1alpha1.RolloutMetricGate{SuccessCondition: "< 0.05", FailureCondition: ">= 0.2"}
	tests := []struct {
		name   string
		gate   *v1alpha1.RolloutMetricGate
		before v1alpha1.RolloutMetricStatus
		sample sample
		want   v1alpha1.RolloutMetricStatus
	}{
		{name: "SuccessCounts", gate: ok, before: v1alpha1.RolloutMetricStatus{Successes: 1, Failures: 0}, sample: sample{values: []float64{0.01, 0.02}},
			want: v1alpha1.RolloutMetricStatus{Value: "0.01, 0.02", Successes: 2}},
		{name: "OneSeriesAboveFailsWithoutAFailureCondition", gate: ok, before: v1alpha1.RolloutMetricStatus{Successes: 2}, sample: sample{values: []float64{0.01, 0.1}},
			want: v1alpha1.RolloutMetricStatus{Value: "0.01, 0.1", Failures: 1}},
		{name: "BetweenTheConditionsNeither", gate: withFailure, before: v1alpha1.RolloutMetricStatus{Successes: 2, Failures: 1}, sample: sample{values: []float64{0.1}},
			want: v1alpha1.RolloutMetricStatus{Value: "0.1", Failures: 1}},
		{name: "FailureCondition", gate: withFailure, before: v1alpha1.RolloutMetricStatus{Failures: 1}, sample: sample{values: []float64{0.3}},
			want: v1alpha1.RolloutMetricStatus{Value: "0.3", Failures: 2}},
		{name: "NoDataIsNeither", gate: ok, before: v1alpha1.RolloutMetricStatus{Successes: 2, Failures: 1}, sample: sample{values: []float64{}},
			want: v1alpha1.RolloutMetricStatus{Value: "no data", Failures: 1}},
		{name: "AQueryErrorFails", gate: ok, before: v1alpha1.RolloutMetricStatus{Successes: 2}, sample: sample{err: errTest("connection refused")},
			want: v1alpha1.RolloutMetricStatus{Value: "connection refused", Failures: 1}},
	}
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := tt.before
			recordSample(&ms, tt.gate, tt.sample, now)
			tt.want.SampleTime = &metav1.Time{Time: now}
			if diff := cmp.Diff(tt.want, ms); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

// The query goes to a real HTTP server, as Prometheus serves its API: rendered from the
// rollout and wave, at the reconcile's time.
func TestReconciler_Query_AgainstAnHTTPServer(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"0.01"]}]}}`))
	}))
	defer srv.Close()
	ro := &v1alpha1.StackRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"},
		Status: v1alpha1.StackRolloutStatus{Target: &v1alpha1.RolloutRevision{Revision: "generation/2"}}}
	w := &v1alpha1.RolloutWaveStatus{Name: "1", Stacks: []string{"web.eu", "web-us"}}
	q, err := renderQuery(`sum(rate(errors{namespace="{{.Namespace}}",stack=~"{{.Stacks}}",rev="{{.Revision}}",wave="{{.Wave}}",r="{{.Rollout}}"}[5m]))`, ro, w)
	if err != nil {
		t.Fatal(err)
	}
	if want := `sum(rate(errors{namespace="team-a",stack=~"web\.eu|web-us",rev="generation/2",wave="1",r="web"}[5m]))`; q != want {
		t.Errorf("query %s, want %s", q, want)
	}
	r := &Reconciler{MetricGateURLs: allow(t, srv.URL)}
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	smp := r.query(t.Context(), "team-a", &v1alpha1.RolloutPrometheus{URL: srv.URL + "/"}, q, now)
	if smp.err != nil {
		t.Fatal(smp.err)
	}
	if diff := cmp.Diff([]float64{0.01}, smp.values); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	if got.URL.Path != "/api/v1/query" || got.URL.Query().Get("query") != q || got.URL.Query().Get("time") != strconv.FormatInt(now.Unix(), 10) {
		t.Errorf("request %s", got.URL)
	}
	if _, err := renderQuery(`{{.Nope}}`, ro, w); err == nil {
		t.Error("a query naming an unknown variable rendered")
	}
}

// A query goes only where the allow-list lets it, and follows a redirect only there too:
// the server outside it gets no request, and the sample fails saying why.
func TestReconciler_Query_OnlyWithinTheAllowList(t *testing.T) {
	var outside atomic.Int32
	out := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { outside.Add(1) }))
	defer out.Close()
	in := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/prom/api/v1/query":
			_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"scalar","result":[1,"0"]}}`))
		case "/moved/api/v1/query":
			http.Redirect(w, r, "/prom/api/v1/query?"+r.URL.RawQuery, http.StatusFound)
		case "/away/api/v1/query":
			http.Redirect(w, r, out.URL+"/api/v1/query", http.StatusFound)
		case "/up/api/v1/query":
			http.Redirect(w, r, "/api/v1/query", http.StatusFound)
		}
	}))
	defer in.Close()
	r := &Reconciler{MetricGateURLs: allow(t, in.URL+"/prom", in.URL+"/moved", in.URL+"/away", in.URL+"/up")}
	tests := []struct {
		name, url string
		wantErr   string // "" for a sample with values
	}{
		{name: "Allowed", url: in.URL + "/prom"},
		{name: "RedirectWithin", url: in.URL + "/moved"},
		{name: "RedirectToAnotherServer", url: in.URL + "/away", wantErr: "redirect to " + out.URL + "/api/v1/query refused: it is not under a URL prefix --metric-gate-urls allows"},
		{name: "RedirectOutOfThePath", url: in.URL + "/up", wantErr: "redirect to " + in.URL + "/api/v1/query refused"},
		{name: "AnotherServer", url: out.URL, wantErr: out.URL + " is not under a URL prefix --metric-gate-urls allows"},
		{name: "DotSegments", url: in.URL + "/prom/..", wantErr: "is not under a URL prefix --metric-gate-urls allows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			smp := r.query(t.Context(), "team-a", &v1alpha1.RolloutPrometheus{URL: tt.url}, "up", time.Now())
			switch {
			case tt.wantErr == "" && smp.err != nil:
				t.Fatalf("sample failed: %v", smp.err)
			case tt.wantErr == "" && len(smp.values) != 1:
				t.Fatalf("values %v, want one", smp.values)
			case tt.wantErr != "" && (smp.err == nil || !strings.Contains(smp.err.Error(), tt.wantErr)):
				t.Fatalf("sample error %v, want one saying %q", smp.err, tt.wantErr)
			}
		})
	}
	if n := outside.Load(); n != 0 {
		t.Errorf("the server outside the allow-list got %d request(s)", n)
	}
}
