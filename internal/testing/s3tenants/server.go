package s3tenants

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stackwright/stackwright/internal/testing/repo"
)

// Server is versitygw on 127.0.0.1 for one test, with users (its internal IAM) and
// metadata (bucket policies and ACLs as extended attributes).
type Server struct {
	// Endpoint is http://127.0.0.1:<port>.
	Endpoint string
	// Root is a client with the root's keys, which reach everything.
	Root Client
	// Dir holds the buckets, one directory each.
	Dir string
}

// Start runs versitygw from ./bin on a free port of 127.0.0.1, serving a directory of the
// test's, and stops it when the test ends (its output is logged if the test failed).
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := repo.Bin()
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.RequireBinaries(bin, "versitygw"); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	s := &Server{
		Endpoint: "http://" + addr,
		Dir:      filepath.Join(t.TempDir(), "buckets"),
	}
	s.Root = Client{Endpoint: s.Endpoint, Access: "root-access", Secret: "root-secret-" + randomHex(8)}
	iam := filepath.Join(t.TempDir(), "iam")
	for _, d := range []string{s.Dir, iam} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "versitygw"), "--port", addr, "--access", s.Root.Access, "--secret", s.Root.Secret,
		"--iam-dir", iam, "posix", s.Dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("failed to start versitygw: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("versitygw output:\n%s", out.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			return s
		}
		select {
		case <-exited:
			t.Fatalf("versitygw exited before it listened on %s", addr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw not listening on %s after 30 s: %v", addr, err)
		}
	}
}

// BackendURL is the Pulumi backend URL of prefix in bucket ("" for the whole bucket), in
// the form the end-to-end tests and the engine's tests use.
func (s *Server) BackendURL(bucket, prefix string) string {
	u := "s3://" + bucket
	if prefix != "" {
		u += "/" + prefix
	}
	return u + "?endpoint=" + s.Endpoint + "&region=us-east-1&use_path_style=true"
}

// freeAddr is a 127.0.0.1 address no one listens on (versitygw takes no port 0).
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}
