package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Stat is what /proc/<pid>/stat and /proc/<pid>/status say about a process's cost.
type Stat struct {
	PID  int
	PPID int
	Comm string
	// State is the one-letter state: R, S, D, Z (zombie: exited, not yet reaped), ….
	State string
	// CPU is the process's own CPU time (utime + stime).
	CPU time.Duration
	// ChildrenCPU is the CPU time of its waited-for children (cutime + cstime): for the
	// manager, the pulumi processes its engine runs started and reaped.
	ChildrenCPU time.Duration
	// RSS is VmRSS and HWM is VmHWM (the peak RSS), in bytes.
	RSS, HWM int64
}

// clockTicks is CLK_TCK, the unit of the times in /proc/<pid>/stat.
var clockTicks = sync.OnceValue(func() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return 100 // USER_HZ on every Linux architecture Go supports but alpha and ia64
})

// Read reads the cost of process pid from /proc.
func Read(pid int) (Stat, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Stat{}, err
	}
	ps, err := ParseStat(stat, clockTicks())
	if err != nil {
		return Stat{}, err
	}
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return Stat{}, err
	}
	ps.RSS, ps.HWM, err = ParseStatusMemory(status)
	return ps, err
}

// ParseStat parses /proc/<pid>/stat with CPU times in units of ticks per second. The
// command name is in parentheses and may itself contain spaces and parentheses, so the
// fields are counted from the last ')'.
func ParseStat(b []byte, ticks int64) (Stat, error) {
	open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return Stat{}, errors.New("malformed /proc stat: no command name")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("malformed /proc stat pid: %w", err)
	}
	// Fields after the name, numbered from 3 (state) as in proc(5).
	f := strings.Fields(string(b[closing+1:]))
	const last = 17 // cstime
	if len(f) < last-2 {
		return Stat{}, fmt.Errorf("malformed /proc stat: %d fields", len(f)+2)
	}
	field := func(n int) (int64, error) { return strconv.ParseInt(f[n-3], 10, 64) }
	var v [18]int64
	for _, n := range []int{4, 14, 15, 16, 17} {
		if v[n], err = field(n); err != nil {
			return Stat{}, fmt.Errorf("malformed /proc stat field %d: %w", n, err)
		}
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / time.Duration(ticks) }
	return Stat{
		PID:         pid,
		PPID:        int(v[4]),
		State:       f[0],
		Comm:        string(b[open+1 : closing]),
		CPU:         tick(v[14] + v[15]),
		ChildrenCPU: tick(v[16] + v[17]),
	}, nil
}

// ParseStatusMemory returns VmRSS and VmHWM from /proc/<pid>/status, in bytes.
func ParseStatusMemory(b []byte) (rss, hwm int64, err error) {
	var seenRSS, seenHWM bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("malformed /proc status line %q", sc.Text())
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("malformed /proc status line %q: %w", sc.Text(), err)
		}
		if key == "VmRSS" {
			rss, seenRSS = n<<10, true
		} else {
			hwm, seenHWM = n<<10, true
		}
	}
	if !seenRSS || !seenHWM {
		return 0, 0, errors.New("no VmRSS/VmHWM in /proc status (zombie process?)")
	}
	return rss, hwm, nil
}

// Children returns the PIDs of parent's direct children whose command name is comm.
func Children(parent int, comm string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		ps, err := ParseStat(b, clockTicks())
		if err == nil && ps.PPID == parent && ps.Comm == comm {
			out = append(out, pid)
		}
	}
	return out
}

// Gone waits up to within for process pid to have exited, and reports whether it did: no
// longer in /proc, or a zombie (its process has exited and only waits for its parent to
// reap it).
func Gone(pid int, within time.Duration) bool {
	stat := filepath.Join("/proc", strconv.Itoa(pid), "stat")
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(stat)
		if err != nil {
			return true
		}
		if ps, err := ParseStat(b, clockTicks()); err == nil && ps.State == "Z" {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
