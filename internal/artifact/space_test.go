package artifact

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFormatBytes_Sizes_ForPeople(t *testing.T) {
	tests := []struct {
		name string
		n    int64
		want string
	}{
		{name: "bytes", n: 900, want: "900 bytes"},
		{name: "exact KiB", n: 64 << 10, want: "64 KiB"},
		{name: "exact MiB", n: 512 << 20, want: "512 MiB"},
		{name: "fraction of GiB", n: 3 << 29, want: "1.5 GiB"},
	}
	var got, want []string
	for _, tc := range tests {
		got = append(got, tc.name+": "+FormatBytes(tc.n))
		want = append(want, tc.name+": "+tc.want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FormatBytes (-want +got):\n%s", diff)
	}
}

// withFree makes the data volume report free bytes for the test's duration.
func withFree(t *testing.T, free int64) {
	t.Helper()
	old := freeBytes
	freeBytes = func(string) (int64, error) { return free, nil }
	t.Cleanup(func() { freeBytes = old })
}

func TestCheckFree_RefusesWhatWouldEatTheReserve(t *testing.T) {
	withFree(t, 1<<30)
	for _, tc := range []struct {
		name         string
		may, reserve int64
		want         error
	}{
		{"fits", 256 << 20, 512 << 20, nil},
		{"exactly fits", 512 << 20, 512 << 20, nil},
		{"eats the reserve", 768 << 20, 512 << 20, ErrNoSpace},
		{"no reserve checks nothing", 4 << 30, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFree(t.TempDir(), tc.may, tc.reserve)
			if !errors.Is(err, tc.want) {
				t.Fatalf("CheckFree = %v; want %v", err, tc.want)
			}
			if err != nil {
				const want = "the manager's data volume has 1 GiB free, less than the 768 MiB this may write plus the 512 MiB kept free (--min-free-data-bytes)"
				if got := err.Error(); len(got) < len(want) || got[:len(want)] != want {
					t.Errorf("message = %q; want it to start %q", got, want)
				}
			}
		})
	}
}

// A store whose volume is short of space refuses a Put before writing anything.
func TestStore_Put_RefusedOnAFullVolume(t *testing.T) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.SetMinFree(64 << 20)
	withFree(t, 100<<20)
	if _, err := s.Put(bytesReader("content"), 50<<20); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put = %v; want ErrNoSpace", err)
	}
	if _, err := s.Put(bytesReader("content"), 10<<20); err != nil {
		t.Fatalf("Put of what fits = %v", err)
	}
}

func bytesReader(s string) *strings.Reader { return strings.NewReader(s) }
