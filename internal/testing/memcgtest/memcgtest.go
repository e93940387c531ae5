package memcgtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stackwright/stackwright/internal/memcg"
)

// NewV1 creates a memory cgroup v1 below the test process's own, limited to limit bytes
// and no swap, and removes it when the test ends (once the processes in it are gone). It
// skips the test where there is no v1 memory controller to write to: a cgroup v2 host,
// an unprivileged run.
func NewV1(t testing.TB, limit int64) string {
	t.Helper()
	own, err := memcg.Reader{}.Read()
	if err != nil || own.Version != 1 {
		t.Skipf("no cgroup v1 memory controller to test with (%+v, %v)", own, err)
	}
	dir, err := os.MkdirTemp(own.Dir, "stackwright-test-")
	if err != nil {
		t.Skipf("cgroup v1 memory controller not writable: %v", err)
	}
	t.Cleanup(func() {
		// A cgroup can be removed only once its processes are gone, which the kernel
		// notes a moment after they are reaped.
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("failed to remove test cgroup %s: %v", dir, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	for _, f := range []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"} {
		err := os.WriteFile(filepath.Join(dir, f), []byte(strconv.FormatInt(limit, 10)), 0o644)
		switch {
		case err == nil:
		case f == "memory.memsw.limit_in_bytes" && errors.Is(err, os.ErrNotExist):
			// No swap accounting: the kernel has no swap for the cgroup to use.
		default:
			t.Skipf("failed to limit test cgroup %s: %v", dir, err)
		}
	}
	return dir
}

// Join moves the calling process into the cgroup v1 dir; the processes it starts from
// then on are in it too.
func Join(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("failed to join cgroup %s: %w", dir, err)
	}
	return nil
}
