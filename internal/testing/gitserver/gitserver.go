package gitserver

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// Repo is a real repository made with the git CLI: a bare repository under a served
// root, and a work tree that commits and pushes to it.
type Repo struct {
	t testing.TB
	// Bare is the served bare repository.
	Bare string
	work string
	env  []string
	n    int
}

// NewRepo creates root/name.git with a first commit of files on main.
func NewRepo(t testing.TB, root, name string, files map[string]string) (*Repo, string) {
	t.Helper()
	home := t.TempDir()
	r := &Repo{
		t:    t,
		Bare: filepath.Join(root, name+".git"),
		work: t.TempDir(),
		env: append(os.Environ(),
			"HOME="+home, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
			"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
		),
	}
	r.run("", "init", "--quiet", "--bare", "--initial-branch=main", r.Bare)
	r.run(r.work, "init", "--quiet", "--initial-branch=main")
	r.run(r.work, "remote", "add", "origin", r.Bare)
	return r, r.Commit(files)
}

func (r *Repo) run(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = r.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// Commit writes files (an empty content deletes the file), commits them and pushes main.
// It returns the new commit's SHA.
func (r *Repo) Commit(files map[string]string) string {
	r.t.Helper()
	r.n++
	for name, content := range files {
		p := filepath.Join(r.work, filepath.FromSlash(name))
		if content == "" {
			if err := os.Remove(p); err != nil {
				r.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.run(r.work, "add", "--all")
	date := fmt.Sprintf("GIT_COMMITTER_DATE=2024-01-01T00:00:%02dZ", r.n)
	cmd := exec.Command("git", "commit", "--quiet", "--allow-empty", "-m", fmt.Sprintf("commit %d", r.n))
	cmd.Dir, cmd.Env = r.work, append(r.env, date, strings.Replace(date, "COMMITTER", "AUTHOR", 1))
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git commit: %v\n%s", err, out)
	}
	r.run(r.work, "push", "--quiet", "origin", "main")
	return r.run(r.work, "rev-parse", "HEAD")
}

// Branch pushes main's head as branch name (created or moved).
func (r *Repo) Branch(name string) {
	r.t.Helper()
	r.run(r.work, "push", "--quiet", "--force", "origin", "HEAD:refs/heads/"+name)
}

// DeleteBranch deletes branch name from the served repository.
func (r *Repo) DeleteBranch(name string) {
	r.t.Helper()
	r.run(r.work, "push", "--quiet", "origin", "--delete", name)
}

// Tag creates an annotated tag of HEAD and pushes it.
func (r *Repo) Tag(name string) {
	r.t.Helper()
	r.run(r.work, "tag", "--annotate", "--message", name, name)
	r.run(r.work, "push", "--quiet", "origin", name)
}

// Configure sets a config value in the served repository.
func (r *Repo) Configure(key, value string) {
	r.t.Helper()
	r.run(r.Bare, "config", key, value)
}

// HTTPServer serves a directory of bare repositories with git's own smart HTTP backend,
// behind HTTP basic auth, counting ref advertisements and pack requests.
type HTTPServer struct {
	*httptest.Server
	// listings counts GET info/refs?service=git-upload-pack: every ls-remote, and every
	// fetch that does not reuse one.
	listings atomic.Int64
	// fetches counts POST git-upload-pack: pack negotiations.
	fetches atomic.Int64
	// refused counts the requests whose credentials were refused.
	refused atomic.Int64
}

// NewHTTPServer serves root on 127.0.0.1. users maps user names to passwords; empty means
// no authentication.
func NewHTTPServer(t testing.TB, root string, users map[string]string) *HTTPServer {
	t.Helper()
	return NewHTTPServerWith(t, root, Options{Users: users})
}

// NewHTTPServerOn is NewHTTPServer on l (e.g. an address inside a test's own network
// namespace); nil means 127.0.0.1. The server owns l from then on.
func NewHTTPServerOn(t testing.TB, l net.Listener, root string, users map[string]string) *HTTPServer {
	t.Helper()
	return NewHTTPServerWith(t, root, Options{Listener: l, Users: users})
}

// Options configure an HTTPServer.
type Options struct {
	// Listener is where to serve; nil means 127.0.0.1. The server owns it from then on.
	Listener net.Listener
	// Users maps user names to passwords; with neither Users nor Authorize, anyone may
	// fetch.
	Users map[string]string
	// Authorize, when set, decides on each request's basic-auth credentials instead of
	// Users: a password that is only valid for a while (a GitHub App's installation
	// token, say).
	Authorize func(user, password string) bool
	// TLS serves HTTPS, with TLSConfig's certificate or else httptest's (Client and
	// Certificate trust it).
	TLS       bool
	TLSConfig *tls.Config
	// Handlers serve the requests whose path starts with one of their keys, without the
	// git authentication: an API the git host also serves (GitHub Enterprise's, under
	// /api/v3/).
	Handlers map[string]http.Handler
}

// NewHTTPServerWith serves root as o says.
func NewHTTPServerWith(t testing.TB, root string, o Options) *HTTPServer {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git-http-backend not available: %v", err)
	}
	s := &HTTPServer{}
	cgiHandler := &cgi.Handler{
		Path: backend,
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
		// The backend complains about missing repositories, which some tests ask for.
		Stderr: io.Discard,
	}
	authorize := o.Authorize
	if authorize == nil && len(o.Users) > 0 {
		authorize = func(user, password string) bool {
			want, known := o.Users[user]
			return known && want == password
		}
	}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for prefix, h := range o.Handlers {
			if strings.HasPrefix(r.URL.Path, prefix) {
				h.ServeHTTP(w, r)
				return
			}
		}
		if authorize != nil {
			u, p, ok := r.BasicAuth()
			if !ok || !authorize(u, p) {
				s.refused.Add(1)
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
		}
		switch {
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs") && r.URL.Query().Get("service") == "git-upload-pack":
			s.listings.Add(1)
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
			s.fetches.Add(1)
		}
		cgiHandler.ServeHTTP(w, r)
	}))
	if o.Listener != nil {
		_ = s.Listener.Close()
		s.Listener = o.Listener
	}
	if o.TLS {
		s.TLS = o.TLSConfig
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// Counts returns the ref listings and pack requests served so far.
func (s *HTTPServer) Counts() [2]int64 { return [2]int64{s.listings.Load(), s.fetches.Load()} }

// Refused returns how many requests were refused for their credentials.
func (s *HTTPServer) Refused() int64 { return s.refused.Load() }
