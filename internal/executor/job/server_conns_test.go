package job

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"testing"
	"time"
)

// The runner API serves at most its cap of connections at once: one more waits until one
// closes, rather than taking the manager's memory and descriptors.
func TestServer_Start_CapsConnections(t *testing.T) {
	cert, _, err := loadOrCreateCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cert: cert, listener: ln, maxConns: 1}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = s.Start(ctx) }()
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	get := func(timeout time.Duration) error {
		// No keep-alive: a dial the timeout abandoned would otherwise finish later, into the
		// pool, and hold the one slot.
		c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test checks the cap, not the server's identity
		resp, err := c.Get("https://" + ln.Addr().String() + "/v1/plugins/x")
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	time.Sleep(100 * time.Millisecond)
	if err := get(time.Second); err == nil {
		t.Error("a second connection was served while the cap was taken")
	}
	_ = idle.Close()
	if err := get(10 * time.Second); err != nil {
		t.Errorf("after the idle connection closed: %v", err)
	}
}
