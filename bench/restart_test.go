package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLogWatch_Consume(t *testing.T) {
	w := &logWatch{first: map[string]time.Time{}, last: map[string]time.Time{}}
	t0 := time.Unix(1000, 0)
	w.consume([]byte(`{"level":"info","ts":"2026-11-27T01:02:10Z","msg":"Starting workers","controller":"stack","controllerGroup":"pulumi.com","controllerKind":"Stack","worker count":10}
{"level":"info","ts":"2026-11-27T01:02:10Z","msg":"Starting workers","controller":"update","worker count":10}
{"level":"info","msg":"Reconciled Stack","controller":"stack","Stack":{"name":"fleet-00001","namespace":"bench-fleet"},"namespace":"bench-fleet","name":"fleet-00001","duration":0.01}
not json at all, "controller":"stack"
{"level":"info","msg":"Reconciled Update","controller":"update","namespace":"bench-fleet","name":"fleet-00002-x"}
`), t0)
	t1 := t0.Add(time.Second)
	w.consume([]byte(`{"level":"info","msg":"Reconciled Stack","controller":"stack","namespace":"bench-fleet","name":"fleet-00001"}
{"level":"info","msg":"Reconciled Stack","controller":"stack","namespace":"bench-fleet","name":"fleet-00002"}
`), t1)
	first, lines, workers, err := w.state()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]time.Time{"bench-fleet/fleet-00001": t0, "bench-fleet/fleet-00002": t1}, first); diff != "" {
		t.Errorf("first (-want +got):\n%s", diff)
	}
	if lines != 3 {
		t.Errorf("lines = %d, want 3", lines)
	}
	if !workers.Equal(t0) {
		t.Errorf("workers = %v, want %v (the stack controller's, not the update controller's)", workers, t0)
	}
	if at, ok := w.lastAt("bench-fleet/fleet-00001"); !ok || !at.Equal(t1) {
		t.Errorf("lastAt = %v, %t; want %v", at, ok, t1)
	}
}

func TestQueueDrained(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	samples := []queueSample{
		{at: at(1), reconciles: 0, depth: 0, active: 0},
		{at: at(2), reconciles: 500, depth: 600, active: 10},
		{at: at(3), reconciles: 1001, depth: 3, active: 10},
		{at: at(4), reconciles: 1010, depth: 0, active: 1},
		{at: at(5), reconciles: 1011, depth: 0, active: 0},
		{at: at(6), reconciles: 1011, depth: 0, active: 0},
	}
	reached, drained := queueDrained(samples, 1000)
	if !reached.Equal(at(3)) || !drained.Equal(at(5)) {
		t.Errorf("queueDrained = %v, %v; want %v, %v", reached, drained, at(3), at(5))
	}
	// An empty queue before the count is reached is the start, not the end.
	reached, drained = queueDrained(samples[:2], 1000)
	if !reached.IsZero() || !drained.IsZero() {
		t.Errorf("queueDrained of too few = %v, %v; want zero times", reached, drained)
	}
}

func TestSpread(t *testing.T) {
	names := []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}
	for _, tt := range []struct {
		k    int
		want []string
	}{
		{k: 2, want: []string{"2", "7"}},
		{k: 5, want: []string{"1", "3", "5", "7", "9"}},
		{k: 10, want: names},
		{k: 20, want: names},
		{k: 1, want: []string{"5"}},
	} {
		if diff := cmp.Diff(tt.want, spread(names, tt.k)); diff != "" {
			t.Errorf("spread(10 names, %d) (-want +got):\n%s", tt.k, diff)
		}
	}
}

func TestPctRow(t *testing.T) {
	ds := []time.Duration{3 * time.Second, time.Second, 2 * time.Second}
	if got, want := pctRow(ds), "2.00 s / 3.00 s (= max: fewer than 100 samples) / 3.00 s (3)"; got != want {
		t.Errorf("pctRow = %q, want %q", got, want)
	}
	if got := pctRow(nil); got != "no samples" {
		t.Errorf("pctRow(nil) = %q", got)
	}
}

func TestDispatchLatencies(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(100, 0).Add(time.Duration(ms) * time.Millisecond) }
	// Four changes at 0 with two slots: the first two start at once (plus 100 and 200 ms),
	// the third 50 ms after the first one ends, the fourth 1.3 s after the next end.
	runs := []changeRun{
		{change: at(0), run: at(3050), done: at(5000)},
		{change: at(0), run: at(100), done: at(3000)},
		{change: at(0), run: at(5300), done: at(7000)},
		{change: at(0), run: at(200), done: at(4000)},
		{change: at(0)}, // never seen running: left out
	}
	got := dispatchLatencies(runs, 2)
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 50 * time.Millisecond, 1300 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dispatchLatencies (-want +got):\n%s", diff)
	}
}
