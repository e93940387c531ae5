package githubapi

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Username is the user name git presents installation tokens with.
const Username = "x-access-token"

// App is one GitHub App with one installation, as GitHub's API sees it.
type App struct {
	ID             int64
	InstallationID int64
	// PrivateKeyPEM is the app's private key, PKCS#1 PEM, as GitHub hands it out.
	PrivateKeyPEM string
	// TokenPrefix starts every token issued, after GitHub's "ghs_": tests look for it
	// where no token may appear.
	TokenPrefix string

	key *rsa.PrivateKey
	ttl time.Duration
	now func() time.Time

	mu       sync.Mutex
	tokens   map[string]time.Time // token -> expiry, on the app's clock
	issued   []string
	requests int
	refused  int
}

// NewApp returns an app whose tokens live ttl on clock now (nil: time.Now).
func NewApp(t testing.TB, id, installationID int64, ttl time.Duration, now func() time.Time) *App {
	t.Helper()
	if now == nil {
		now = time.Now
	}
	key := NewKey(t)
	return &App{
		ID: id, InstallationID: installationID, TokenPrefix: fmt.Sprintf("app%dinst%d", id, installationID),
		PrivateKeyPEM: EncodeKey(key), key: key, ttl: ttl, now: now, tokens: map[string]time.Time{},
	}
}

// NewKey returns a fresh 2048-bit RSA key, the size GitHub issues.
func NewKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// EncodeKey returns key as PKCS#1 PEM ("RSA PRIVATE KEY"), GitHub's format.
func EncodeKey(key *rsa.PrivateKey) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
}

var tokensPath = regexp.MustCompile(`/app/installations/([0-9]+)/access_tokens$`)

// ServeHTTP serves POST <prefix>/app/installations/{id}/access_tokens, with any prefix
// (GitHub Enterprise serves its API under /api/v3).
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := tokensPath.FindStringSubmatch(r.URL.Path)
	if r.Method != http.MethodPost || m == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests++
	if err := a.verify(r.Header.Get("Authorization")); err != nil {
		a.refused++
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": err.Error()})
		return
	}
	if m[1] != strconv.FormatInt(a.InstallationID, 10) {
		a.refused++
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	token := "ghs_" + a.TokenPrefix + "x" + base64.RawURLEncoding.EncodeToString(b)
	expiresAt := a.now().Add(a.ttl)
	a.tokens[token] = expiresAt
	a.issued = append(a.issued, token)
	writeJSON(w, http.StatusCreated, map[string]any{"token": token, "expires_at": expiresAt.UTC().Format(time.RFC3339Nano)})
}

// verify checks an app JWT as GitHub does: RS256 signed by the app's key, issued by the
// app, expired neither by the real clock nor further than ten minutes out.
func (a *App) verify(authorization string) error {
	jwt, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok {
		return fmt.Errorf("a JSON web token is required")
	}
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return fmt.Errorf("a JSON web token could not be decoded")
	}
	var header struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss string `json:"iss"`
		Iat int64  `json:"iat"`
		Exp int64  `json:"exp"`
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || decode(parts[0], &header) != nil || decode(parts[1], &claims) != nil {
		return fmt.Errorf("a JSON web token could not be decoded")
	}
	if header.Alg != "RS256" {
		return fmt.Errorf("the JWT must be signed with RS256, not %q", header.Alg)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(&a.key.PublicKey, crypto.SHA256, digest[:], sig) != nil {
		return fmt.Errorf("the JWT's signature does not match the app's public key")
	}
	if claims.Iss != strconv.FormatInt(a.ID, 10) {
		return fmt.Errorf("the JWT's issuer %q is not app %d", claims.Iss, a.ID)
	}
	now := time.Now().Unix()
	if claims.Exp <= now || claims.Exp > now+600 || claims.Iat > now+60 {
		return fmt.Errorf("the JWT's exp or iat is out of range")
	}
	return nil
}

func decode(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Valid reports whether user and password are an installation token of the app that has
// not expired on the app's clock, as a git server behind GitHub checks them.
func (a *App) Valid(user, password string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	expiresAt, ok := a.tokens[password]
	return user == Username && ok && a.now().Before(expiresAt)
}

// Revoke makes every token issued so far invalid, as uninstalling the app would.
func (a *App) Revoke() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.tokens)
}

// Requests returns the token requests served and those refused among them.
func (a *App) Requests() (served, refused int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests, a.refused
}

// Issued returns the tokens issued so far, oldest first.
func (a *App) Issued() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.issued)
}
