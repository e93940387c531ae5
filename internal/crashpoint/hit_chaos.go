//go:build chaos

package crashpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

var (
	armed, nth = parse(os.Getenv(Env))
	hits       atomic.Int64
)

func parse(v string) (string, int64) {
	point, count, ok := strings.Cut(v, "#")
	if !ok {
		return point, 1
	}
	n, err := strconv.ParseInt(count, 10, 64)
	if err != nil || n < 1 {
		panic(fmt.Sprintf("%s=%q: want <point> or <point>#<n>", Env, v))
	}
	return point, n
}

// Hit kills the process with SIGKILL, as an OOM kill or a node failure would, when point
// is the armed one and this is its armed hit. It says so on stderr first, so that the test
// knows where the process died.
func Hit(point string) {
	if point != armed || hits.Add(1) != nth {
		return
	}
	fmt.Fprintf(os.Stderr, "crashpoint: SIGKILL at %s\n", point)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
