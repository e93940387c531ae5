package bench

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/internal/procfs"
)

func TestIdleHourRows_ScalesToAnHour(t *testing.T) {
	req := func(verb string, v float64) Sample {
		return Sample{Name: "apiserver_request_total", Labels: map[string]string{"verb": verb}, Value: v}
	}
	mgr := func(cpu time.Duration, reqs float64) snapshot {
		return snapshot{mgr: procfs.Stat{CPU: cpu}, metrics: Metrics{{Name: "rest_client_requests_total", Value: reqs}}}
	}
	tests := []struct {
		name     string
		d        time.Duration
		apiAfter Metrics
		apiErr   error
		want     [][]string
	}{
		{
			name:     "TenMinutesTimesSix",
			d:        10 * time.Minute,
			apiAfter: Metrics{req("GET", 12), req("LIST", 2), req("WATCH", 1)},
			want: [][]string{
				{"manager CPU per idle hour", "12.00 s"},
				{"manager API requests per idle hour (its own counter)", "60"},
				{"API server requests per idle hour (`apiserver_request_total`, all clients)", "42 (GET 30, LIST 12)"},
			},
		},
		{
			name:   "APIServerUnreadable",
			d:      time.Hour,
			apiErr: errors.New("forbidden"),
			want: [][]string{
				{"manager CPU per idle hour", "2.00 s"},
				{"manager API requests per idle hour (its own counter)", "10"},
				{"API server requests per idle hour", "not read: forbidden"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := Metrics{req("GET", 7), req("WATCH", 1)}
			got := idleHourRows(tt.d, mgr(time.Second, 5), mgr(3*time.Second, 15), before, tt.apiAfter, tt.apiErr)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
		})
	}
}
