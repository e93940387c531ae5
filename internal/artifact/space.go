package artifact

import (
	"errors"
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// FlagMinFree is the manager's flag that sets the space kept free on its data volume.
const FlagMinFree = "min-free-data-bytes"

// ErrNoSpace: the data volume has too little free space for what an operation may write.
var ErrNoSpace = errors.New("not enough free space on the manager's data volume")

// SpaceError is an operation refused for the space it may need.
type SpaceError struct {
	// Free is what the volume had free, May what the operation may write, and Reserve
	// what is kept free for everything else (state, artifacts of running Updates).
	Free, May, Reserve int64
}

func (e *SpaceError) Error() string {
	return fmt.Sprintf("the manager's data volume has %s free, less than the %s this may write plus the %s kept free (--%s): "+
		"the platform team must grow the volume, or lower the caps",
		FormatBytes(e.Free), FormatBytes(e.May), FormatBytes(e.Reserve), FlagMinFree)
}

func (e *SpaceError) Is(target error) bool { return target == ErrNoSpace }

// freeBytes is what an unprivileged writer may still write on the volume of dir; a
// variable so that tests can stand in for a full volume.
var freeBytes = func(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// CheckFree refuses, with a *SpaceError, an operation that may write up to may bytes
// under dir while the volume has less than may+reserve free. The data volume is shared by
// every tenant's caches and the state of the manager's own: a fetch that would fill it
// must fail before it starts, with a reason, rather than leave no room for anyone. A
// reserve of 0 checks nothing, and so does a volume whose free space cannot be read.
func CheckFree(dir string, may, reserve int64) error {
	if reserve <= 0 {
		return nil
	}
	if free, err := freeBytes(dir); err == nil && free < satAdd(may, reserve) {
		return &SpaceError{Free: free, May: may, Reserve: reserve}
	}
	return nil
}

// FormatBytes writes n for people: "900 bytes", "64 KiB", "1.5 GiB".
func FormatBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f %s", v, units[u])
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}
