package ociregistry

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackwright/stackwright/internal/testing/repo"
)

// Registry is a running registry.
type Registry struct {
	// Host is host:port, the registry part of image references pushed to it.
	Host string
	// Log is the registry's log file.
	Log string
}

// Start starts a registry on addr (host:port; "127.0.0.1:0" picks a port) storing blobs
// under dir, waits until it answers /v2/ and stops it when t ends.
func Start(t testing.TB, addr, dir string) *Registry {
	t.Helper()
	r, stop, err := start(addr, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return r
}

// Run is Start for programs that are not tests (benchmarks): the caller stops the
// registry with the function it returns.
func Run(addr, dir string) (*Registry, func(), error) { return start(addr, dir) }

func start(addr, dir string) (*Registry, func(), error) {
	bin, err := repo.Bin()
	if err != nil {
		return nil, nil, err
	}
	if err := repo.RequireBinaries(bin, "registry"); err != nil {
		return nil, nil, err
	}
	if strings.HasSuffix(addr, ":0") {
		// The registry has no way to report a port it picked: take a free one first.
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to pick a port: %w", err)
		}
		addr = l.Addr().String()
		l.Close()
	}
	storage := filepath.Join(dir, "storage")
	if err := os.MkdirAll(storage, 0o755); err != nil {
		return nil, nil, err
	}
	config := filepath.Join(dir, "config.yml")
	// Deletes on, so that tests can remove what they pushed; no auth, no TLS: the node's
	// containerd is told to use plain HTTP for this host by hosts.toml.
	if err := os.WriteFile(config, fmt.Appendf(nil, `version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`, storage, addr), 0o644); err != nil {
		return nil, nil, err
	}
	logPath := filepath.Join(dir, "registry.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(filepath.Join(bin, "registry"), "serve", config)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The registry reports telemetry nowhere and reads no environment of the test's.
	cmd.Env = []string{"OTEL_TRACES_EXPORTER=none", "HOME=" + dir}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, nil, fmt.Errorf("failed to start the registry: %w", err)
	}
	// exited is closed once the process is reaped; waitErr is its exit status then.
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
		logFile.Close()
	}
	r := &Registry{Host: addr, Log: logPath}
	if err := repo.WaitHTTP(http.DefaultClient, "http://"+r.Host+"/v2/", 30*time.Second, 50*time.Millisecond, exited, &waitErr); err != nil {
		stop()
		b, _ := os.ReadFile(logPath)
		return nil, nil, fmt.Errorf("failed to start the registry: %w; its log:\n%s", err, b)
	}
	return r, stop, nil
}
