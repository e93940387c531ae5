package job

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stackwright/stackwright/internal/budget"
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

// A report is charged to the manager's memory budget while it is read: one that finds the
// budget spent is answered 503 (the runner tries again), one past maxResultBytes is
// tooLarge, one that is not JSON is 400; the charge holds what was read until released.
func TestDecodeResult_Budget_SpentAnswersRetryLater(t *testing.T) {
	t.Parallel()
	report := `{"updateUID":"u1","status":{"message":"ok"}}`
	tests := []struct {
		name         string
		free         int64
		body         string
		wantStatus   int
		wantTooLarge bool
	}{
		{name: "Fits", free: 1 << 20, body: report},
		{name: "Spent", free: 4, body: report, wantStatus: http.StatusServiceUnavailable},
		{name: "TooLarge", free: 16 << 20, body: `{"updateUID":"u1","status":{"message":"` + strings.Repeat("x", maxResultBytes) + `"}}`, wantTooLarge: true},
		{name: "NotJSON", free: 1 << 20, body: "not json", wantStatus: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const limit = 32 << 20
			mem := budget.New(limit)
			other := mem.Charge()
			if err := other.Take(limit - tt.free); err != nil {
				t.Fatal(err)
			}
			charge := mem.Charge()
			r := httptest.NewRequest(http.MethodPost, "/v1/results/ns/u", strings.NewReader(tt.body))
			res, tooLarge, status, err := decodeResult(httptest.NewRecorder(), r, charge)
			if status != tt.wantStatus || tooLarge != tt.wantTooLarge || (err != nil) != (tt.wantStatus != 0) {
				t.Fatalf("decodeResult() = status %d, tooLarge %v, %v; want status %d, tooLarge %v", status, tooLarge, err, tt.wantStatus, tt.wantTooLarge)
			}
			if tt.wantStatus == http.StatusServiceUnavailable && !errors.Is(err, budget.ErrSpent) {
				t.Errorf("error %v is not budget.ErrSpent", err)
			}
			if tt.name == "Fits" && (res == nil || res.UpdateUID != "u1" || charge.Held() < int64(len(report))) {
				t.Errorf("result %+v, charge holds %d bytes; want the report, charged", res, charge.Held())
			}
			charge.Release()
			if got := mem.InUse(); got != limit-tt.free {
				t.Errorf("in use after release = %d; want %d", got, limit-tt.free)
			}
		})
	}
}
