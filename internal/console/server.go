package console

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/internal/kubectlplugin"
)

//go:embed assets
var assets embed.FS

const (
	// tokenParam carries the token in the URL the command prints.
	tokenParam = "token"
	// csrfHeader must be on every POST. The page's script sets it; a form another site
	// submits cannot, and a cross-origin fetch that sets it needs a CORS preflight, which
	// the server never grants.
	csrfHeader = "X-Stackwright-Console"
	// cookiePrefix names the cookie, followed by the port: cookies do not tell ports
	// apart, and two consoles side by side must not overwrite each other's token.
	cookiePrefix = "stackwright-console-"
	// contentSecurityPolicy lets the page load only its own assets and talk only to its
	// server: no inline script, so data rendered by mistake as markup cannot run.
	contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

// Server serves the console to the person whose credentials env holds.
type Server struct {
	env     *kubectlplugin.Env
	watcher client.WithWatch
	pods    corev1client.PodsGetter
	token   string
	cookie  string
	// hosts are the Host headers accepted: the served address, and localhost at its port.
	hosts map[string]bool
	// origin is the served address as a page's origin.
	origin string
}

// New returns the console for env (made by kubectlplugin.Connect, so that env.Config is
// set) served at addr, a loopback address with its port.
func New(env *kubectlplugin.Env, addr net.Addr) (*Server, error) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() {
		return nil, fmt.Errorf("the console serves on a loopback address only, not %s", addr)
	}
	if env.Config == nil {
		return nil, errors.New("the console needs the connection the client was made from")
	}
	watcher, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("failed to create watch client: %w", err)
	}
	pods, err := corev1client.NewForConfig(env.Config)
	if err != nil {
		return nil, fmt.Errorf("failed to create Pod client: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("failed to generate token: %w", err)
	}
	port := strconv.Itoa(tcp.Port)
	return &Server{
		env: env, watcher: watcher, pods: pods,
		token:  hex.EncodeToString(b),
		cookie: cookiePrefix + port,
		hosts:  map[string]bool{tcp.String(): true, net.JoinHostPort("localhost", port): true},
		origin: "http://" + tcp.String(),
	}, nil
}

// URL is the address to open the console at, token included: whoever has it acts as the
// person the console serves.
func (s *Server) URL() string {
	return s.origin + "/?" + url.Values{tokenParam: {s.token}}.Encode()
}

// Handler serves the page, its assets, the JSON API and the event stream, each behind the
// checks of guard.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets") // the directory is embedded: cannot fail
	files := http.FileServerFS(static)
	mux.Handle("GET /{$}", files)
	mux.Handle("GET /assets/", http.StripPrefix("/assets", files))
	mux.HandleFunc("GET /api/fleet", s.fleet)
	mux.HandleFunc("GET /api/stacks/{namespace}/{name}", s.stack)
	mux.HandleFunc("GET /api/stacks/{namespace}/{name}/plan", s.plan)
	mux.HandleFunc("POST /api/stacks/{namespace}/{name}/{decision}", s.decide)
	mux.HandleFunc("GET /api/updates/{namespace}/{name}", s.update)
	mux.HandleFunc("GET /api/rollouts", s.rollouts)
	mux.HandleFunc("GET /api/rollouts/{namespace}/{name}", s.rollout)
	mux.HandleFunc("POST /api/rollouts/{namespace}/{name}/{request}", s.requestRollout)
	mux.HandleFunc("GET /api/templates", s.templates)
	mux.HandleFunc("GET /api/events", s.events)
	return s.guard(mux)
}

// guard refuses what does not come from the page the token opened, and keeps the browser
// from caching or framing anything.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		// A page of another site that resolves its own name to 127.0.0.1 (DNS rebinding)
		// sends that name as Host.
		if !s.hosts[r.Host] {
			http.Error(w, "unknown host "+strconv.Quote(r.Host)+": open the console at "+s.origin, http.StatusMisdirectedRequest)
			return
		}
		if t := r.URL.Query().Get(tokenParam); t != "" {
			if !s.validToken(t) {
				http.Error(w, "wrong token", http.StatusUnauthorized)
				return
			}
			if r.Method == http.MethodGet && r.URL.Path == "/" {
				// The token leaves the address bar (and the history) once it is in the cookie.
				http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
				http.Redirect(w, r, "/", http.StatusSeeOther)
				return
			}
		} else if c, err := r.Cookie(s.cookie); err != nil || !s.validToken(c.Value) {
			http.Error(w, "missing or wrong token: open the console at the address `kubectl stackwright ui` printed", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			// Same origin: the page that sends it was served by this server, under the
			// Host (one of ours) it sends it to.
			if r.Header.Get(csrfHeader) == "" || r.Header.Get("Origin") != "http://"+r.Host {
				http.Error(w, "cross-site request refused", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) validToken(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.token)) == 1
}
