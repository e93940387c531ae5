package console

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/internal/kubectlplugin"
	"github.com/stackwright/stackwright/internal/scheme"
)

// newTestServer is a console whose API server does not exist: the guard answers before
// anything is read.
func newTestServer(t *testing.T) *Server {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: "http://127.0.0.1:1"}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	env := &kubectlplugin.Env{Client: c, Namespace: "default", Now: time.Now, Config: cfg}
	srv, err := New(env, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8123})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestNew_NonLoopbackAddress_Refused(t *testing.T) {
	env := &kubectlplugin.Env{Config: &rest.Config{}}
	if _, err := New(env, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 80}); err == nil {
		t.Fatal("New served on 10.0.0.1")
	}
}

func TestServe_Address_LoopbackOnly(t *testing.T) {
	tests := []struct {
		address string
		want    string
	}{
		{"0.0.0.0:0", `the console serves on a loopback address only (such as 127.0.0.1:0), not "0.0.0.0"`},
		{"192.0.2.1:8080", `the console serves on a loopback address only (such as 127.0.0.1:0), not "192.0.2.1"`},
		{"example.com:0", `the console serves on a loopback address only (such as 127.0.0.1:0), not "example.com"`},
		{"127.0.0.1", `failed to read address "127.0.0.1": address 127.0.0.1: missing port in address`},
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			err := Serve(t.Context(), &kubectlplugin.Env{}, tt.address, io.Discard, nil)
			if diff := cmp.Diff(tt.want, fmt.Sprint(err)); diff != "" {
				t.Errorf("Serve (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServer_Handler_Guard(t *testing.T) {
	s := newTestServer(t)
	cookie := &http.Cookie{Name: "stackwright-console-8123", Value: s.token}
	tests := []struct {
		name   string
		method string
		target string
		host   string
		cookie *http.Cookie
		header map[string]string
		// want is the status; location where a redirect goes.
		want     int
		location string
	}{
		{name: "no token", method: "GET", target: "/", want: http.StatusUnauthorized},
		{name: "wrong token in the URL", method: "GET", target: "/?token=nope", want: http.StatusUnauthorized},
		{name: "wrong cookie", method: "GET", target: "/api/fleet", cookie: &http.Cookie{Name: cookie.Name, Value: "nope"}, want: http.StatusUnauthorized},
		{name: "another console's cookie", method: "GET", target: "/api/fleet", cookie: &http.Cookie{Name: "stackwright-console-9", Value: s.token}, want: http.StatusUnauthorized},
		{name: "token opens the page without it", method: "GET", target: "/?token=" + s.token, want: http.StatusSeeOther, location: "/"},
		{name: "cookie serves the page", method: "GET", target: "/", cookie: cookie, want: http.StatusOK},
		{name: "token serves the API", method: "GET", target: "/assets/app.js?token=" + s.token, want: http.StatusOK},
		{name: "localhost is the same host", method: "GET", target: "/assets/app.css", host: "localhost:8123", cookie: cookie, want: http.StatusOK},
		{name: "rebound name", method: "GET", target: "/?token=" + s.token, host: "evil.example:8123", want: http.StatusMisdirectedRequest},
		{name: "other port", method: "GET", target: "/", host: "127.0.0.1:9999", cookie: cookie, want: http.StatusMisdirectedRequest},
		{name: "POST without the console's header", method: "POST", target: "/api/stacks/a/b/frobnicate", cookie: cookie,
			header: map[string]string{"Origin": "http://127.0.0.1:8123"}, want: http.StatusForbidden},
		{name: "POST from another origin", method: "POST", target: "/api/stacks/a/b/frobnicate", cookie: cookie,
			header: map[string]string{csrfHeader: "1", "Origin": "http://evil.example"}, want: http.StatusForbidden},
		{name: "POST without origin", method: "POST", target: "/api/stacks/a/b/frobnicate", cookie: cookie,
			header: map[string]string{csrfHeader: "1"}, want: http.StatusForbidden},
		{name: "POST from the page under the other name", method: "POST", target: "/api/stacks/a/b/frobnicate", host: "localhost:8123", cookie: cookie,
			header: map[string]string{csrfHeader: "1", "Origin": "http://127.0.0.1:8123"}, want: http.StatusForbidden},
		// Past the guard, the handler does not know the decision.
		{name: "POST from the page", method: "POST", target: "/api/stacks/a/b/frobnicate", cookie: cookie,
			header: map[string]string{csrfHeader: "1", "Origin": "http://127.0.0.1:8123"}, want: http.StatusNotFound},
	}
	h := s.Handler()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "http://127.0.0.1:8123"+tt.target, strings.NewReader("{}"))
			if tt.host != "" {
				r.Host = tt.host
			}
			if tt.cookie != nil {
				r.AddCookie(tt.cookie)
			}
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
			if diff := cmp.Diff(tt.location, w.Header().Get("Location")); diff != "" {
				t.Errorf("Location (-want +got):\n%s", diff)
			}
			if w.Header().Get("Content-Security-Policy") != contentSecurityPolicy {
				t.Errorf("no Content-Security-Policy on the answer")
			}
		})
	}
}

// The cookie the token sets cannot be read by script, nor is it sent with another site's
// requests.
func TestServer_Handler_TokenSetsStrictCookie(t *testing.T) {
	s := newTestServer(t)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1:8123/?token="+s.token, nil))
	cookies := w.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies: %v", cookies)
	}
	c := cookies[0]
	got := []any{c.Name, c.Value, c.Path, c.HttpOnly, c.SameSite}
	want := []any{"stackwright-console-8123", s.token, "/", true, http.SameSiteStrictMode}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cookie (-want +got):\n%s", diff)
	}
}

func TestServer_URL_CarriesAFreshToken(t *testing.T) {
	a, b := newTestServer(t), newTestServer(t)
	if a.URL() == b.URL() {
		t.Fatal("two consoles share a token")
	}
	if len(a.token) != 64 || !strings.HasPrefix(a.URL(), "http://127.0.0.1:8123/?token="+a.token) {
		t.Errorf("URL %s, token %q", a.URL(), a.token)
	}
}
