package kubetest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/procfs"
)

// Component is a process of the test control plane.
type Component string

// The control plane's processes, named as their binaries (and their /proc comm).
const (
	Etcd      Component = "etcd"
	APIServer Component = "kube-apiserver"
)

// restarts keeps the processes Restart started in place of envtest's, for the package's end
// to stop.
type restarts struct {
	mu    sync.Mutex
	procs map[Component]*restarted
}

type restarted struct {
	cmd    *exec.Cmd
	out    *engine.Tail // the end of its output, for a failed start
	exited chan struct{}
}

// Restart crashes one process of the control plane (SIGKILL: no graceful shutdown, no
// goodbye to clients) and, after down, starts it again in place: the same binary,
// arguments, working directory, data and certificates, on the same address, so that
// clients come back to the same cluster with the same credentials, as after a crashed
// static Pod of a real control plane is restarted. It returns once the API server is ready
// again. Tests that run while a Restart does see the outage: do not run them in parallel
// with it.
func (e *Env) Restart(t testing.TB, c Component, down time.Duration) {
	t.Helper()
	if err := e.restart(c, down); err != nil {
		t.Fatalf("failed to restart %s: %v", c, err)
	}
}

func (e *Env) restart(c Component, down time.Duration) error {
	r := e.restarts
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := r.pid(c)
	if err != nil {
		return err
	}
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	raw, err := os.ReadFile(filepath.Join(proc, "cmdline"))
	if err != nil {
		return fmt.Errorf("failed to read the command line of %s[%d]: %w", c, pid, err)
	}
	argv := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	exe, err := os.Readlink(filepath.Join(proc, "exe"))
	if err != nil {
		return fmt.Errorf("failed to read the binary of %s[%d]: %w", c, pid, err)
	}
	cwd, err := os.Readlink(filepath.Join(proc, "cwd"))
	if err != nil {
		return fmt.Errorf("failed to read the working directory of %s[%d]: %w", c, pid, err)
	}

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("failed to kill %s[%d]: %w", c, pid, err)
	}
	// Whoever started it (envtest, or an earlier Restart) reaps it; exited, it holds no
	// port any more.
	if !procfs.Gone(pid, 30*time.Second) {
		return fmt.Errorf("%s[%d] still runs 30s after SIGKILL", c, pid)
	}
	time.Sleep(down)

	out := engine.NewTail(4096)
	cmd := exec.Command(exe, argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = cwd, out, out
	// Should the test binary die, the process goes with it, as envtest's would.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failed to start %s again: %w", c, err)
	}
	p := &restarted{cmd: cmd, out: out, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	r.procs[c] = p
	if err := e.awaitReady(p, 2*time.Minute); err != nil {
		return fmt.Errorf("%w; the end of %s's output:\n%s", err, c, out)
	}
	return nil
}

// pid finds the running process of c: the one an earlier Restart started, else envtest's,
// a child of this test binary.
func (r *restarts) pid(c Component) (int, error) {
	if p := r.procs[c]; p != nil {
		return p.cmd.Process.Pid, nil
	}
	pids := procfs.Children(os.Getpid(), string(c))
	if len(pids) != 1 {
		return 0, fmt.Errorf("found %d %s processes among this test binary's children; want 1", len(pids), c)
	}
	return pids[0], nil
}

// awaitReady waits until the API server answers /readyz, which covers its etcd, or p exits.
func (e *Env) awaitReady(p *restarted, within time.Duration) error {
	hc, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		return fmt.Errorf("failed to create HTTP client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var last string
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("it exited: %v", p.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("the API server is not ready %s after the restart: %s", within, last)
		case <-time.After(100 * time.Millisecond):
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(e.Config.Host, "/")+"/readyz", nil)
		if err != nil {
			return fmt.Errorf("failed to build readiness request: %w", err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		last = fmt.Sprintf("%s: %s", resp.Status, body)
	}
}

// stop ends the process Restart started in place of c's, if any. The API server goes first
// and etcd after envtest's Stop (see run): an API server whose etcd is gone takes its whole
// stop timeout to shut down.
func (r *restarts) stop(c Component) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[c]
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	delete(r.procs, c)
}
