package githubapp

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Username is the HTTP user name GitHub expects with an installation token.
const Username = "x-access-token"

const (
	// DefaultRefreshBefore is how long before its expiry a token is replaced. Every
	// request of one git session carries the token the session started with, and the
	// fetch request follows the ref listing by up to the listing's timeout (two minutes),
	// so a token handed out must outlive that with room to spare. GitHub's tokens live
	// an hour, so this costs one mint in twelve.
	DefaultRefreshBefore = 5 * time.Minute
	// mintTimeout bounds one token request, whatever the caller's deadline.
	mintTimeout = 30 * time.Second
	// failedTTL is how long a refused or failed mint is answered from memory: a fleet of
	// Stacks on a wrong key must not hammer the API (GitHub rate-limits apps), and a
	// corrected Secret changes the key anyway.
	failedTTL = 10 * time.Second
	// minRetryAge is how old a token must be before a refusal of it is taken for a
	// revocation rather than for the installation's lack of access (see Refused).
	minRetryAge = time.Minute
	// maxResponseBytes bounds what the API may send back. An Enterprise host is whatever
	// host the Stack's repository URL names, so it may be hostile; a token response is a
	// few hundred bytes.
	maxResponseBytes = 1 << 20

	githubHost = "github.com"
	githubAPI  = "https://api.github.com"
)

// APIURL returns the REST API base URL of the GitHub that serves repository URL repoURL:
// https://api.github.com for github.com, and https://<host>/api/v3 (GitHub Enterprise
// Server's layout) for any other host, its port kept unless it is its scheme's default.
// The API is always reached over HTTPS: the JWT sent there can mint tokens for every
// installation of the app.
func APIURL(repoURL string) (string, error) {
	u, err := url.Parse(repoURL)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("failed to find the host of repository URL %q", repoURL)
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "443" && u.Scheme == "https" || port == "80" && u.Scheme == "http" {
		port = ""
	}
	if host == githubHost && port == "" {
		return githubAPI, nil
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return "https://" + host + "/api/v3", nil
}

// Credentials are one app installation's, as read for one namespace.
type Credentials struct {
	// Namespace is the Stack's: tokens are never shared across namespaces.
	Namespace string
	// APIURL is the REST API base (see APIURL).
	APIURL         string
	AppID          int64
	InstallationID int64
	// PrivateKey is the app's PEM RSA private key (PKCS#1 or PKCS#8).
	PrivateKey []byte
}

// Token is an installation access token.
type Token struct {
	Value     string
	ExpiresAt time.Time
	// IssuedAt is when it was asked for, by the Tokens' clock.
	IssuedAt time.Time
}

// Options configure Tokens; the zero value is production's.
type Options struct {
	// Transport reaches the API; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// Now is the clock that ages tokens; nil means time.Now.
	Now func() time.Time
	// RefreshBefore is how long before expiry a token is replaced; zero means
	// DefaultRefreshBefore.
	RefreshBefore time.Duration
}

// Tokens mints installation tokens and caches them per Credentials.
type Tokens struct {
	transport     http.RoundTripper
	now           func() time.Time
	refreshBefore time.Duration

	mu      sync.Mutex
	entries map[key]*entry
}

// key identifies Credentials without holding the private key.
type key struct {
	namespace, apiURL     string
	app, installation     int64
	privateKeyFingerprint [sha256.Size]byte
}

type entry struct {
	// mu makes concurrent callers wait for one mint instead of each minting.
	mu sync.Mutex
	// apps signs the app's JWTs with the parsed key.
	apps     *ghinstallation.AppsTransport
	token    Token
	err      error
	failedAt time.Time
}

// New returns an empty token cache.
func New(o Options) *Tokens {
	t := &Tokens{transport: o.Transport, now: o.Now, refreshBefore: o.RefreshBefore, entries: map[key]*entry{}}
	if t.transport == nil {
		t.transport = http.DefaultTransport
	}
	t.transport = limitedTransport{t.transport}
	if t.now == nil {
		t.now = time.Now
	}
	if t.refreshBefore <= 0 {
		t.refreshBefore = DefaultRefreshBefore
	}
	return t
}

func keyOf(c Credentials) key {
	return key{namespace: c.Namespace, apiURL: c.APIURL, app: c.AppID, installation: c.InstallationID, privateKeyFingerprint: sha256.Sum256(c.PrivateKey)}
}

// Token returns a token for c valid for at least the refresh margin, minting one when the
// cached one is missing or about to expire.
func (t *Tokens) Token(ctx context.Context, c Credentials) (Token, error) {
	e := t.entry(c)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := t.now()
	if e.token.Value != "" && now.Before(e.token.ExpiresAt.Add(-t.refreshBefore)) {
		return e.token, nil
	}
	if e.err != nil && now.Sub(e.failedAt) < failedTTL {
		return Token{}, e.err
	}
	tok, err := t.mint(ctx, c, e)
	if err != nil {
		e.token, e.err, e.failedAt = Token{}, err, now
		return Token{}, err
	}
	e.token, e.err = tok, nil
	ctrl.LoggerFrom(ctx).V(1).Info("Minted GitHub App installation token", "api", c.APIURL, "app", c.AppID, "installation", c.InstallationID, "expiresAt", tok.ExpiresAt)
	return tok, nil
}

// Refused records that a git server refused tok, a token of c, and reports whether a new
// token is worth asking for. A token refused soon after it was minted says the
// installation cannot read the repository, which another token would not change; one
// refused later may have been revoked, so it is dropped and the next Token mints anew.
func (t *Tokens) Refused(c Credentials, tok Token) bool {
	if t.now().Sub(tok.IssuedAt) < minRetryAge {
		return false
	}
	e := t.entry(c)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.token.Value == tok.Value {
		e.token = Token{}
	}
	return true
}

// entry returns c's cache entry, creating it. Creating one also drops the entries whose
// token has expired and whose failure is no longer remembered: nothing in them is worth
// keeping but a parsed key, and tenants can make as many keys as they like.
func (t *Tokens) entry(c Credentials) *entry {
	k := keyOf(c)
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.entries[k]; ok {
		return e
	}
	now := t.now()
	for other, oe := range t.entries {
		if oe.mu.TryLock() {
			if !now.Before(oe.token.ExpiresAt) && now.Sub(oe.failedAt) >= failedTTL {
				delete(t.entries, other)
			}
			oe.mu.Unlock()
		}
	}
	e := &entry{}
	t.entries[k] = e
	return e
}

// mint asks the API for a token. Called with e.mu held: ghinstallation's transports are
// reconfigured per request, so one entry's are never used concurrently.
func (t *Tokens) mint(ctx context.Context, c Credentials, e *entry) (Token, error) {
	if e.apps == nil {
		apps, err := ghinstallation.NewAppsTransport(t.transport, c.AppID, c.PrivateKey)
		if err != nil {
			// The parser's error describes the format, never the key, but it is not
			// needed: there is one format to get right.
			return Token{}, errors.New("the private key is not a PEM-encoded RSA private key (PKCS#1 or PKCS#8), as GitHub issues them")
		}
		e.apps = apps
	}
	itr := ghinstallation.NewFromAppsTransport(e.apps, c.InstallationID)
	itr.BaseURL = c.APIURL
	ctx, cancel := context.WithTimeout(ctx, mintTimeout)
	defer cancel()
	issued := t.now()
	value, err := itr.Token(ctx)
	if err != nil {
		return Token{}, explain(c, err)
	}
	expiresAt, _, err := itr.Expiry()
	if err != nil || value == "" {
		return Token{}, fmt.Errorf("failed to read the token GitHub at %s issued for installation %d of app %d: the answer has no token", c.APIURL, c.InstallationID, c.AppID)
	}
	return Token{Value: value, ExpiresAt: expiresAt, IssuedAt: issued}, nil
}

// explain turns ghinstallation's error into one that says what to fix. GitHub's answer body
// is left out: it is not needed to tell the cases apart, and is whatever the host sent.
func explain(c Credentials, err error) error {
	var he *ghinstallation.HTTPError
	if !errors.As(err, &he) {
		return fmt.Errorf("failed to get a token from GitHub at %s for installation %d of app %d: %w", c.APIURL, c.InstallationID, c.AppID, err)
	}
	if he.Response == nil {
		if he.RootCause != nil {
			return fmt.Errorf("failed to reach GitHub at %s: %w", c.APIURL, he.RootCause)
		}
		return fmt.Errorf("failed to reach GitHub at %s", c.APIURL)
	}
	// ghinstallation leaves the body of a refusal open for its caller to read.
	_ = he.Response.Body.Close()
	status := he.Response.Status
	switch he.Response.StatusCode {
	case http.StatusUnauthorized:
		return fmt.Errorf("GitHub at %s refused the app's credentials (%s): the private key is not app %d's, or the app ID is wrong", c.APIURL, status, c.AppID)
	case http.StatusNotFound:
		return fmt.Errorf("GitHub at %s has no installation %d of app %d (%s): check the installation ID, and that the app is installed", c.APIURL, c.InstallationID, c.AppID, status)
	case http.StatusForbidden:
		return fmt.Errorf("GitHub at %s refused a token for installation %d of app %d (%s): the installation may be suspended, or the app rate-limited", c.APIURL, c.InstallationID, c.AppID, status)
	}
	return fmt.Errorf("GitHub at %s answered %s when asked for a token for installation %d of app %d", c.APIURL, status, c.InstallationID, c.AppID)
}

// limitedTransport caps every response body at maxResponseBytes.
type limitedTransport struct{ base http.RoundTripper }

func (l limitedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = limitedBody{Reader: io.LimitReader(resp.Body, maxResponseBytes), Closer: resp.Body}
	return resp, nil
}

type limitedBody struct {
	io.Reader
	io.Closer
}
