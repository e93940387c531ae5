package cluster

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// component is one long-running process of the cluster.
type component struct {
	name  string
	path  string
	args  []string
	env   []string
	ready func(ctx context.Context) error
}

// process keeps one component running: a component that exits while the cluster is up is
// restarted after a growing delay, as a node's init system would.
type process struct {
	c       component
	logFile string
	logger  *log.Logger

	mu      sync.Mutex
	cmd     *exec.Cmd
	stopped bool
	done    chan struct{} // closed when the supervising goroutine returns
}

func startProcess(c component, logFile string, logger *log.Logger) (*process, error) {
	p := &process{c: c, logFile: logFile, logger: logger, done: make(chan struct{})}
	exited, err := p.spawn()
	if err != nil {
		return nil, err
	}
	go p.supervise(exited)
	return p, nil
}

func (p *process) spawn() (<-chan error, error) {
	out, err := os.OpenFile(p.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("failed to open %s log: %w", p.c.name, err)
	}
	cmd := exec.Command(p.c.path, p.c.args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), p.c.env...)
	// Its own process group, so that stopping the cluster also stops what it started
	// (the kubelet's and containerd's helpers), and a Ctrl-C in a terminal does not.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("failed to start %s: %w", p.c.name, err)
	}
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
	exited := make(chan error, 1)
	go func() {
		exited <- cmd.Wait()
		_ = out.Close()
	}()
	return exited, nil
}

func (p *process) supervise(exited <-chan error) {
	defer close(p.done)
	delay := time.Second
	for {
		err := <-exited
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if stopped {
			return
		}
		p.logger.Printf("%s exited (%v); restarting in %s (log: %s)", p.c.name, err, delay, p.logFile)
		time.Sleep(delay)
		delay = min(delay*2, 30*time.Second)
		next, err := p.spawn()
		if err != nil {
			p.logger.Printf("%s: %v", p.c.name, err)
			return
		}
		exited = next
	}
}

// stop sends SIGTERM to the component's process group and SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	p.mu.Lock()
	p.stopped = true
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// waitReady polls check until it succeeds, the process gives up or ctx ends.
func waitReady(ctx context.Context, name string, check func(context.Context) error, logFile string) error {
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last error: %w)\n%s", name, ctx.Err(), last, tail(logFile, 20))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of a log file, indented, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ") + "\n"
}

// run executes a one-shot command and returns its combined output in the error.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("failed to run %s %v: %w: %s", name, args, err, out)
	}
	return nil
}

var errNotRunning = errors.New("cluster is not running")
