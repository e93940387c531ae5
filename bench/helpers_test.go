package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

func TestPercentile_NearestRank(t *testing.T) {
	ten := []time.Duration{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}
	tests := []struct {
		name string
		ds   []time.Duration
		p    float64
		want time.Duration
	}{
		{name: "empty", ds: nil, p: 50, want: 0},
		{name: "single", ds: []time.Duration{7}, p: 99, want: 7},
		{name: "medianOfTen", ds: ten, p: 50, want: 5},
		{name: "p90OfTen", ds: ten, p: 90, want: 9},
		{name: "p99OfTen", ds: ten, p: 99, want: 10},
		{name: "p100", ds: ten, p: 100, want: 10},
		{name: "tinyP", ds: ten, p: 0.1, want: 1},
		{name: "medianOfThree", ds: []time.Duration{3, 1, 2}, p: 50, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.ds, tt.p); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %v; want %v", tt.ds, tt.p, got, tt.want)
			}
		})
	}
	if ten[0] != 10 {
		t.Errorf("Percentile sorted its input in place: %v", ten)
	}
}

func TestSummarize_Distribution(t *testing.T) {
	got := Summarize([]time.Duration{4 * time.Second, 2 * time.Second, 6 * time.Second})
	want := Summary{N: 3, Min: 2 * time.Second, P50: 4 * time.Second, P90: 6 * time.Second, P99: 6 * time.Second,
		Max: 6 * time.Second, Mean: 4 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Summarize (-want +got):\n%s", diff)
	}
	if got := Summarize(nil); got != (Summary{}) {
		t.Errorf("Summarize(nil) = %+v; want zero", got)
	}
	if r := Ratio(time.Second, 0); !math.IsNaN(r) {
		t.Errorf("Ratio(1s, 0) = %v; want NaN", r)
	}
}

func TestParseMetrics_CountersLabelsAndEscapes(t *testing.T) {
	text := `# HELP rest_client_requests_total Number of HTTP requests.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 12
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PATCH"} 3
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PATCH"} 1
controller_runtime_reconcile_total{controller="stack",result="success"} 7 1700000000000
weird{msg="a \"quoted\" \\ value, with } brace"} 1.5e+01
process_cpu_seconds_total 4.25
`
	m, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Sum("rest_client_requests_total", nil); got != 16 {
		t.Errorf("Sum(requests) = %v; want 16", got)
	}
	if got := m.Sum("rest_client_requests_total", map[string]string{"method": "PATCH"}); got != 4 {
		t.Errorf("Sum(PATCH) = %v; want 4", got)
	}
	if diff := cmp.Diff(map[string]float64{"200": 15, "409": 1}, m.By("rest_client_requests_total", "code")); diff != "" {
		t.Errorf("By(code) (-want +got):\n%s", diff)
	}
	if got := m.Sum("controller_runtime_reconcile_total", nil); got != 7 {
		t.Errorf("a timestamp after the value: Sum = %v; want 7", got)
	}
	if got := m.By("weird", "msg"); got[`a "quoted" \ value, with } brace`] != 15 {
		t.Errorf("escaped label: By = %v", got)
	}
	if got := m.Sum("process_cpu_seconds_total", nil); got != 4.25 {
		t.Errorf("unlabelled sample = %v; want 4.25", got)
	}
	before, _ := ParseMetrics(strings.NewReader(`rest_client_requests_total{method="GET"} 10` + "\n"))
	if diff := cmp.Diff(map[string]float64{"GET": 2, "PATCH": 4}, DeltaBy(before, m, "rest_client_requests_total", "method")); diff != "" {
		t.Errorf("DeltaBy (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"novalue", `x{a="1"`, `x{a=1} 2`, "x 1 2 3", "x abc"} {
		if _, err := ParseMetrics(strings.NewReader(bad + "\n")); err == nil {
			t.Errorf("ParseMetrics(%q) = nil error; want one", bad)
		}
	}
}

func TestCronSlots_Drift(t *testing.T) {
	at := func(hm string) time.Time {
		tm, err := time.Parse("2006-01-02 15:04:05", "2026-11-23 "+hm)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	tests := []struct {
		name     string
		cron     string
		from, to string
		want     []string
	}{
		{name: "everyFiveMinutes", cron: "*/5 * * * *", from: "12:03:30", to: "12:13:30", want: []string{"12:05:00", "12:10:00"}},
		{name: "startOnASlotExcludedEndOnASlotIncluded", cron: "*/5 * * * *", from: "12:00:00", to: "12:10:00", want: []string{"12:05:00", "12:10:00"}},
		{name: "everyMinute", cron: "* * * * *", from: "12:00:30", to: "12:03:30", want: []string{"12:01:00", "12:02:00", "12:03:00"}},
		{name: "hourlyNoneInTenMinutes", cron: "@hourly", from: "12:05:00", to: "12:15:00", want: nil},
		{name: "dailySlotJustAfterTheWindow", cron: "0 0 * * *", from: "23:55:00", to: "23:59:59", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sched, err := (&pulumiv1.DriftSchedule{Cron: tt.cron}).Parse()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range cronSlots(sched, at(tt.from), at(tt.to)) {
				got = append(got, s.Format("15:04:05"))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cronSlots(%q, %s, %s) (-want +got):\n%s", tt.cron, tt.from, tt.to, diff)
			}
		})
	}
}
