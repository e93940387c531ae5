package manager

import "testing"

func TestMemoryReleaser_Tick_ReleasesOnceAfterEachBurst(t *testing.T) {
	tests := []struct {
		name string
		// pending is what the executor reports at each tick (queued + running).
		pending      []int
		wantReleases int
	}{
		{name: "neverBusy", pending: []int{0, 0, 0}},
		{name: "stillBusy", pending: []int{3, 1, 2}},
		{name: "oneBurst", pending: []int{0, 2, 1, 0, 0, 0}, wantReleases: 1},
		{name: "twoBursts", pending: []int{1, 0, 4, 0}, wantReleases: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i, releases := 0, 0
			m := &memoryReleaser{
				pending: func() (int, int) { n := tt.pending[i]; i++; return n, 0 },
				release: func() { releases++ },
			}
			for range tt.pending {
				m.tick()
			}
			if releases != tt.wantReleases {
				t.Errorf("%d releases; want %d", releases, tt.wantReleases)
			}
		})
	}
}
