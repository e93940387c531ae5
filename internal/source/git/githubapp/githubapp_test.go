package githubapp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/internal/source/git/githubapp"
	"github.com/stackwright/stackwright/internal/testing/githubapi"
)

const (
	testApp          = 4242
	testInstallation = 777
	tokenTTL         = time.Hour
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is a fake GitHub API over TLS with one app, and a token cache that trusts it, on
// one clock.
type fixture struct {
	app    *githubapi.App
	server *httptest.Server
	clock  *fakeClock
	tokens *githubapp.Tokens
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clock := &fakeClock{now: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	app := githubapi.NewApp(t, testApp, testInstallation, tokenTTL, clock.Now)
	srv := httptest.NewTLSServer(app)
	t.Cleanup(srv.Close)
	return &fixture{app: app, server: srv, clock: clock, tokens: githubapp.New(githubapp.Options{Transport: srv.Client().Transport, Now: clock.Now})}
}

func (f *fixture) creds(ns string) githubapp.Credentials {
	return githubapp.Credentials{Namespace: ns, APIURL: f.server.URL, AppID: testApp, InstallationID: testInstallation, PrivateKey: []byte(f.app.PrivateKeyPEM)}
}

func (f *fixture) token(t *testing.T, c githubapp.Credentials) githubapp.Token {
	t.Helper()
	tok, err := f.tokens.Token(context.Background(), c)
	if err != nil {
		t.Fatalf("Token() = %v", err)
	}
	return tok
}

func (f *fixture) served(t *testing.T) int {
	t.Helper()
	n, _ := f.app.Requests()
	return n
}

func TestAPIURL_RepositoryHosts(t *testing.T) {
	tests := []struct {
		repo, want string
	}{
		{"https://github.com/acme/infra.git", "https://api.github.com"},
		{"https://GitHub.com/acme/infra", "https://api.github.com"},
		{"https://github.com:443/acme/infra.git", "https://api.github.com"},
		{"https://x-access-token:secret@github.com/acme/infra.git", "https://api.github.com"},
		{"https://ghe.example.com/acme/infra.git", "https://ghe.example.com/api/v3"},
		{"https://ghe.example.com:8443/acme/infra.git", "https://ghe.example.com:8443/api/v3"},
		{"http://ghe.example.com/acme/infra.git", "https://ghe.example.com/api/v3"},
		{"http://ghe.example.com:80/acme/infra.git", "https://ghe.example.com/api/v3"},
		{"https://github.com:8443/acme/infra.git", "https://github.com:8443/api/v3"},
		{"https://[::1]:8443/acme/infra.git", "https://[::1]:8443/api/v3"},
		{"https://[::1]/acme/infra.git", "https://[::1]/api/v3"},
	}
	for _, tt := range tests {
		t.Run(tt.repo, func(t *testing.T) {
			got, err := githubapp.APIURL(tt.repo)
			if err != nil {
				t.Fatalf("APIURL(%q) = %v", tt.repo, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("APIURL(%q) (-want +got):\n%s", tt.repo, diff)
			}
		})
	}
}

// The first call mints a token the git host accepts; later calls get it from memory.
func TestTokens_Token_MintsOnceThenReuses(t *testing.T) {
	f := newFixture(t)
	first := f.token(t, f.creds("team"))
	if !f.app.Valid(githubapp.Username, first.Value) {
		t.Fatalf("token %q is not one the app issued", first.Value)
	}
	if want := f.clock.Now().Add(tokenTTL); !first.ExpiresAt.Equal(want) {
		t.Errorf("ExpiresAt = %v, want %v", first.ExpiresAt, want)
	}
	f.clock.Advance(30 * time.Minute)
	again := f.token(t, f.creds("team"))
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("second Token() (-first +second):\n%s", diff)
	}
	if got := f.served(t); got != 1 {
		t.Errorf("API served %d token requests, want 1", got)
	}
}

// A token is replaced once it has less than the refresh margin left, while it is still
// valid: a git session begun with it must not outlive it.
func TestTokens_Token_RotatesBeforeExpiry(t *testing.T) {
	f := newFixture(t)
	first := f.token(t, f.creds("team"))

	f.clock.Advance(tokenTTL - githubapp.DefaultRefreshBefore - time.Second)
	if got := f.token(t, f.creds("team")); got.Value != first.Value {
		t.Errorf("just outside the margin Token() = a new token, want the cached one")
	}
	f.clock.Advance(2 * time.Second)
	second := f.token(t, f.creds("team"))
	if second.Value == first.Value {
		t.Fatalf("inside the margin Token() = the cached token, want a new one")
	}
	if !f.app.Valid(githubapp.Username, first.Value) || !f.app.Valid(githubapp.Username, second.Value) {
		t.Errorf("both tokens should still be valid at rotation")
	}
	f.clock.Advance(githubapp.DefaultRefreshBefore)
	if f.app.Valid(githubapp.Username, first.Value) || !f.app.Valid(githubapp.Username, second.Value) {
		t.Errorf("after the first expired: only the second should be valid")
	}
	if got := f.served(t); got != 2 {
		t.Errorf("API served %d token requests, want 2", got)
	}
}

// Namespaces never share a token, even with the same app; a replaced key takes effect at
// once.
func TestTokens_Token_KeyedPerNamespaceAndKey(t *testing.T) {
	f := newFixture(t)
	a := f.token(t, f.creds("team-a"))
	b := f.token(t, f.creds("team-b"))
	if a.Value == b.Value {
		t.Errorf("two namespaces got the same token")
	}
	if again := f.token(t, f.creds("team-a")); again.Value != a.Value {
		t.Errorf("team-a's second Token() = a new token, want its cached one")
	}
	other := f.creds("team-a")
	other.PrivateKey = []byte(githubapi.EncodeKey(githubapi.NewKey(t)))
	if _, err := f.tokens.Token(context.Background(), other); err == nil {
		t.Errorf("Token() with another key = the cached token, want the API's refusal")
	}
	if got := f.served(t); got != 3 {
		t.Errorf("API served %d token requests, want 3", got)
	}
}

// Every refusal says what to fix, and none quotes the private key.
func TestTokens_Token_RefusalsExplained(t *testing.T) {
	f := newFixture(t)
	otherKey := githubapi.EncodeKey(githubapi.NewKey(t))
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	tests := []struct {
		name   string
		modify func(*githubapp.Credentials)
		want   string
	}{
		{"another app's key", func(c *githubapp.Credentials) { c.PrivateKey = []byte(otherKey) }, "refused the app's credentials (401 Unauthorized): the private key is not app 4242's, or the app ID is wrong"},
		{"wrong app ID", func(c *githubapp.Credentials) { c.AppID = 1 }, "refused the app's credentials (401 Unauthorized): the private key is not app 1's"},
		{"wrong installation", func(c *githubapp.Credentials) { c.InstallationID = 99 }, "has no installation 99 of app 4242 (404 Not Found)"},
		{"not a key", func(c *githubapp.Credentials) {
			c.PrivateKey = []byte("-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n")
		}, "the private key is not a PEM-encoded RSA private key"},
		{"API down", func(c *githubapp.Credentials) { c.APIURL = closedURL }, "failed to reach GitHub at " + closedURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := f.creds(tt.name)
			tt.modify(&c)
			_, err := f.tokens.Token(context.Background(), c)
			if err == nil {
				t.Fatalf("Token() = a token, want an error")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Token() = %q, want it to contain %q", err, tt.want)
			}
			for line := range strings.SplitSeq(string(c.PrivateKey), "\n") {
				if len(line) > 8 && !strings.HasPrefix(line, "-----") && strings.Contains(err.Error(), line) {
					t.Errorf("Token() error quotes the private key: %q", err)
				}
			}
		})
	}
}

// A refusal is answered from memory for a few seconds: Stacks on a wrong key do not each
// ask GitHub at every reconcile.
func TestTokens_Token_RefusalRememberedBriefly(t *testing.T) {
	f := newFixture(t)
	c := f.creds("team")
	c.AppID = 1
	for range 3 {
		if _, err := f.tokens.Token(context.Background(), c); err == nil {
			t.Fatal("Token() = a token, want a refusal")
		}
	}
	if got := f.served(t); got != 1 {
		t.Errorf("API served %d token requests within the failure's memory, want 1", got)
	}
	f.clock.Advance(10 * time.Second)
	_, _ = f.tokens.Token(context.Background(), c)
	if got := f.served(t); got != 2 {
		t.Errorf("API served %d token requests after the failure's memory, want 2", got)
	}
}

// A token the git host refuses right after it was minted is kept (the installation lacks
// access; another token would not help); one refused later is dropped and replaced.
func TestTokens_Refused_ReplacesOnlyOlderTokens(t *testing.T) {
	f := newFixture(t)
	c := f.creds("team")
	first := f.token(t, c)
	if f.tokens.Refused(c, first) {
		t.Errorf("Refused(fresh token) = true, want false")
	}
	if got := f.token(t, c); got.Value != first.Value {
		t.Errorf("after refusing a fresh token Token() = a new one, want the cached one")
	}
	f.clock.Advance(2 * time.Minute)
	if !f.tokens.Refused(c, first) {
		t.Errorf("Refused(older token) = false, want true")
	}
	if got := f.token(t, c); got.Value == first.Value {
		t.Errorf("after refusing an older token Token() = it again, want a new one")
	}
	if got := f.served(t); got != 2 {
		t.Errorf("API served %d token requests, want 2", got)
	}
}

// An API that answers without end (an Enterprise host is whatever the repository URL
// names) costs a bounded read and an error.
func TestTokens_Token_BoundsTheAnswer(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"token": "`))
		chunk := []byte(strings.Repeat("a", 64<<10))
		for range 64 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	tokens := githubapp.New(githubapp.Options{Transport: srv.Client().Transport})
	key := githubapi.EncodeKey(githubapi.NewKey(t))
	_, err := tokens.Token(context.Background(), githubapp.Credentials{Namespace: "team", APIURL: srv.URL, AppID: 1, InstallationID: 2, PrivateKey: []byte(key)})
	if err == nil {
		t.Fatal("Token() = a token from a 4 MiB answer, want an error")
	}
	t.Log(err)
}
