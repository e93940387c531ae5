package chaos_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// outageProxy stands between the manager and the API server, on 127.0.0.1, and can take
// the API server away: what a restart of kube-apiserver (or an etcd outage long enough to
// fail every request) looks like from the manager. During an outage every connection is cut
// and new ones are refused; afterwards the same address serves the same API server, as a
// restarted one would.
type outageProxy struct {
	addr, upstream string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func startOutageProxy(t *testing.T, upstream string) *outageProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &outageProxy{addr: ln.Addr().String(), upstream: upstream, conns: map[net.Conn]bool{}}
	p.serve(ln)
	t.Cleanup(func() {
		p.down()
		p.wg.Wait()
	})
	return p
}

func (p *outageProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.pipe(c) })
		}
	})
}

func (p *outageProxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.track(c, up) {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(up, c); _ = up.Close() })
	wg.Go(func() { _, _ = io.Copy(c, up); _ = c.Close() })
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// track registers a connection pair, unless an outage began meanwhile (then it closes them).
func (p *outageProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = true
	}
	return true
}

// down starts an outage: the listener closes and every connection through it is cut.
func (p *outageProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// up ends an outage on the same address.
func (p *outageProxy) up(t *testing.T) {
	t.Helper()
	var ln net.Listener
	var err error
	// The port was ours a moment ago; another process taking it in between is unlikely,
	// and a retry covers the kernel's brief hold on it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if ln, err = net.Listen("tcp", p.addr); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("failed to listen on %s again: %v", p.addr, err)
	}
	p.serve(ln)
}

// config is cfg reaching the API server through the proxy.
func (p *outageProxy) config(t *testing.T, cfg *rest.Config) *rest.Config {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	if u.Hostname() != "127.0.0.1" {
		t.Fatal(errors.New("the test API server is not on 127.0.0.1: " + cfg.Host))
	}
	c := rest.CopyConfig(cfg)
	u.Host = p.addr
	c.Host = u.String()
	return c
}

// The API server goes away while a fleet converges (8 s, during an engine run), longer
// than a reconcile, a watch or an engine run's status write can wait: the manager must neither crash-loop nor
// lose or repeat work. Every Stack ends Ready, each desired state applied once, no lock left.
func TestManager_APIServerOutage_FleetConvergesOnce(t *testing.T) {
	m := newManager(t, t.TempDir())
	proxy := startOutageProxy(t, upstreamAddr(t))
	m.kubeconfig = writeKubeconfig(t, proxy.config(t, env.Config), t.TempDir())
	// make test cuts once, make test-chaos (CHAOS_KILLS=20) twice.
	outages := max(1, profileFromEnv(t).kills/10)
	faultWhileRunning(t, m, "outage", outages, "the API server came back", func(int) {
		proxy.down()
		time.Sleep(8 * time.Second)
		if m.dead() {
			t.Fatalf("the manager exited during the outage:\n%s", tail(m.logPath, 4096))
		}
		proxy.up(t)
	})
}

// The control plane itself restarts while a fleet converges: etcd crashes and comes back
// in place (the API server stays up; what needs storage waits or fails), then kube-apiserver does
// (connections reset, watches end, the watch cache is rebuilt from etcd). Each happens while
// an up executes a program. Every Stack ends Ready, each desired state applied once, no
// lock left, and the manager never exits.
func TestManager_ControlPlaneRestart_FleetConvergesOnce(t *testing.T) {
	m := newManager(t, t.TempDir())
	components := []kubetest.Component{kubetest.Etcd, kubetest.APIServer}
	faultWhileRunning(t, m, "restart", len(components), "the control plane restarted", func(round int) {
		env.Restart(t, components[round], 5*time.Second)
		if m.dead() {
			t.Fatalf("the manager exited when %s restarted:\n%s", components[round], tail(m.logPath, 4096))
		}
	})
}

// faultWhileRunning runs rounds of 4 new Stacks, starting m with the first. In each round,
// once an up executes a program, fault strikes: the run finishes during it, and its result
// must wait for the API server. Then every Stack must end Ready, some run must have waited
// for the API server to record its result (or the faults missed the runs), and each
// desired state must have been applied once, with no lock left.
func faultWhileRunning(t *testing.T, m *manager, prefix string, rounds int, since string, fault func(round int)) {
	t.Helper()
	ctx := t.Context()
	ns := env.Namespace(t)
	files := filepath.Join(t.TempDir(), "files")
	var names []string
	for i := range rounds {
		for j := range 4 {
			name := fmt.Sprintf("%s-%d-%d", prefix, i, j)
			names = append(names, name)
			create(ctx, t, program(ns, name))
			create(ctx, t, m.stack(ns, name, filepath.Join(files, name)))
		}
		if i == 0 {
			m.start(t)
		}
		waitEngine(t, m)
		fault(i)
	}
	waitAllReady(t, m, ns, names, 5*time.Minute, since)
	if !strings.Contains(tail(m.logPath, 1<<22), "API server unavailable; trying again") {
		t.Errorf("no run waited for the API server to record its result: the faults (%s) missed the runs", prefix)
	}
	requireAppliedOnce(t, m, names)
}

// upstreamAddr is the test API server's host:port.
func upstreamAddr(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// waitEngine waits until an up is executing a program: a YAML language host (comm is
// truncated to 15 characters) runs in the manager's data directory.
func waitEngine(t *testing.T, m *manager) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); len(processesNow(m.dataDir, "pulumi-language")) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no engine run executed a program within 2 minutes")
		}
	}
}
