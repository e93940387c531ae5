package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRolloutRings(t *testing.T) {
	tests := []struct {
		n    int
		want []int
	}{
		{n: 1000, want: []int{10, 90, 300, 600}},
		{n: 100, want: []int{1, 9, 30, 60}},
		{n: 40, want: []int{1, 3, 12, 24}},
		{n: 10, want: []int{1, 1, 2, 6}},
		{n: 4, want: []int{1, 1, 1, 1}},
		{n: 1001, want: []int{11, 90, 300, 600}},
	}
	for _, tt := range tests {
		got := rolloutRings(tt.n)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("rolloutRings(%d) (-want +got):\n%s", tt.n, diff)
		}
		sum := 0
		for _, s := range got {
			sum += s
		}
		if sum != tt.n {
			t.Errorf("rolloutRings(%d) sums to %d", tt.n, sum)
		}
	}
}

func TestRingOf(t *testing.T) {
	sizes := []int{1, 3, 12, 24}
	want := map[int]int{0: 0, 1: 1, 3: 1, 4: 2, 15: 2, 16: 3, 39: 3}
	for i, r := range want {
		if got := ringOf(sizes, i); got != r {
			t.Errorf("ringOf(%v, %d) = %d; want %d", sizes, i, got, r)
		}
	}
}

func TestBoundaries_SubtractBakeAndSkipUnseen(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	waves := []waveTimes{
		{ring: 0, lastReady: at(1000)},
		{ring: 1, opened: at(1100), firstCreated: at(1200), firstRun: at(1500), lastReady: at(9000)},
		{ring: 2, firstRun: at(9000 + 5000 + 800)},
		{ring: 3},
	}
	got := boundaries(waves, 5*time.Second)
	want := []boundary{
		{from: 0, to: 1, overhead: 500*time.Millisecond - 5*time.Second, toOpened: 100 * time.Millisecond, toCreated: 200 * time.Millisecond, toRun: 500 * time.Millisecond},
		{from: 1, to: 2, overhead: 800 * time.Millisecond, toRun: 5800 * time.Millisecond},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(boundary{})); diff != "" {
		t.Errorf("boundaries (-want +got):\n%s", diff)
	}
}
