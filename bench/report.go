package bench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// report is the results file, rewritten after every section so that an interrupted run
// still leaves what it measured.
type report struct {
	mu       sync.Mutex
	path     string
	out      io.Writer
	header   string
	sections []string
}

func (r *report) add(title, body string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := "## " + title + "\n\n" + strings.TrimRight(body, "\n") + "\n"
	r.sections = append(r.sections, s)
	fmt.Fprintln(r.out, "\n"+s)
	if err := r.writeLocked(); err != nil {
		fmt.Fprintf(r.out, "bench: %v\n", err)
	}
}

func (r *report) writeLocked() error {
	var b strings.Builder
	b.WriteString(r.header)
	for _, s := range r.sections {
		b.WriteString("\n" + s)
	}
	if err := os.WriteFile(r.path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", r.path, err)
	}
	return nil
}

// table renders a markdown table.
func table(header []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n")
	b.WriteString("|" + strings.Repeat(" --- |", len(header)) + "\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

// resultsPrefix returns dir/<date>-n<N>, with -2, -3... when a run of that day exists.
func resultsPrefix(dir string, now time.Time, n int) string {
	base := filepath.Join(dir, fmt.Sprintf("%s-n%d", now.Format("2006-01-02"), n))
	p := base
	for i := 2; ; i++ {
		if _, err := os.Stat(p + ".md"); os.IsNotExist(err) {
			return p
		}
		p = fmt.Sprintf("%s-%d", base, i)
	}
}

// machine describes where the run happened.
type machine struct {
	CPU, Kernel, Memory, Go, Commit string
	Cores                           int
	Load                            string
}

func describeMachine(root string) machine {
	m := machine{Cores: runtime.NumCPU(), CPU: "unknown", Memory: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb int64
				if _, err := fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb); err == nil {
					m.Memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.Go = runtime.Version()
	if out, err := exec.Command("go", "env", "GOVERSION").Output(); err == nil {
		m.Go = strings.TrimSpace(string(out))
	}
	m.Commit = "unknown"
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			m.Commit += " (with uncommitted changes)"
		}
	}
	m.Load = loadAvg()
	return m
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
