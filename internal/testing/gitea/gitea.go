package gitea

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackwright/stackwright/internal/testing/repo"
)

const (
	// AdminUser is the site administrator Start creates ("admin" is a name Gitea keeps
	// for itself).
	AdminUser = "stackwright"
	// AdminPassword is AdminUser's password.
	AdminPassword = "stackwright-tests-1"
)

// Server is a running Gitea.
type Server struct {
	// URL is the server's root, http://127.0.0.1:<port> (no trailing slash); the API is
	// under URL/api/v1.
	URL string
	// Token is an API token of AdminUser with every scope; git over HTTP takes it as
	// AdminUser's password.
	Token string
	// Dir holds app.ini, the database, the repositories and the log.
	Dir string
	// Log is Gitea's log (its standard output and error).
	Log string

	t      testing.TB
	bin    string
	config string
	env    []string
	client *http.Client
	host   string
	wrap   []string
}

// Start starts Gitea, waits until its API answers, creates AdminUser and Token, and stops
// it when t ends. It skips t when bin/gitea has not been built.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// Options say where Gitea listens.
type Options struct {
	// Host is the address Gitea listens on and names itself by; default 127.0.0.1.
	Host string
	// Wrap runs Gitea through a command (e.g. ip netns exec <name>, so that it listens
	// in a cluster's network namespace, on an address only that namespace has).
	Wrap []string
}

// StartWith is Start with o.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	bin, err := repo.Bin()
	if err != nil {
		t.Fatal(err)
	}
	if repo.RequireBinaries(bin, "gitea") != nil {
		t.Skipf("no Gitea at %s: `make gitea` builds it (`make tools` does not)", filepath.Join(bin, "gitea"))
	}
	s := &Server{
		t:      t,
		bin:    filepath.Join(bin, "gitea"),
		Dir:    t.TempDir(),
		client: &http.Client{Timeout: 30 * time.Second},
		host:   cmp.Or(o.Host, "127.0.0.1"),
		wrap:   o.Wrap,
	}
	s.Log = filepath.Join(s.Dir, "gitea.log")
	stop, err := s.start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := s.createAdmin(); err != nil {
		t.Fatal(s.withLog(err))
	}
	return s
}

func (s *Server) start() (stop func(), err error) {
	// Gitea takes its port from app.ini only: take a free one first (here, which is also
	// where a wrapped Gitea runs, but for its network namespace: a port free here is
	// free there but by chance).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("failed to pick a port: %w", err)
	}
	addr := l.Addr().(*net.TCPAddr)
	l.Close()
	s.URL = fmt.Sprintf("http://%s", net.JoinHostPort(s.host, fmt.Sprint(addr.Port)))
	s.config = filepath.Join(s.Dir, "app.ini")
	if err := os.WriteFile(s.config, []byte(appINI(s.Dir, s.host, addr.Port)), 0o600); err != nil {
		return nil, fmt.Errorf("failed to write app.ini: %w", err)
	}
	home := filepath.Join(s.Dir, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create Gitea's home: %w", err)
	}
	// Gitea runs git (found on PATH) and its own hooks; nothing of the test's git
	// configuration or environment reaches them. Gitea writes its global git
	// configuration (git config --global, in data/home): GIT_CONFIG_GLOBAL=/dev/null, as
	// the tests' own git runs with, would have git replace /dev/null with a file.
	s.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1"}
	logFile, err := os.Create(s.Log)
	if err != nil {
		return nil, fmt.Errorf("failed to create the log: %w", err)
	}
	args := append(slices.Clone(s.wrap), s.bin, "--config", s.config, "--work-path", s.Dir, "web")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir, cmd.Env = s.Dir, s.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("failed to start gitea: %w", err)
	}
	// exited is closed once the process is reaped; waitErr is its exit status then.
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	stop = func() {
		// Gitea shuts down gracefully on SIGTERM, within a second when idle.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
	}
	if err := repo.WaitHTTP(s.client, s.URL+"/api/v1/version", time.Minute, 100*time.Millisecond, exited, &waitErr); err != nil {
		stop()
		return nil, s.withLog(fmt.Errorf("failed to start gitea: %w", err))
	}
	return stop, nil
}

// appINI is the configuration of a Gitea in dir on port: installed, SQLite, no SSH, no
// mail, no Actions or packages, nothing fetched from the internet, in-process queues (as
// upstream's own integration tests), webhooks allowed to loopback and private addresses.
func appINI(dir, host string, port int) string {
	return fmt.Sprintf(`APP_NAME = Stackwright tests
RUN_MODE = prod
WORK_PATH = %[1]s
; Tests and CI run as root here; Gitea refuses root without this.
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
PROTOCOL = http
HTTP_ADDR = %[5]s
HTTP_PORT = %[2]d
DOMAIN = %[5]s
ROOT_URL = http://%[5]s:%[2]d/
LOCAL_ROOT_URL = http://%[5]s:%[2]d/
APP_DATA_PATH = %[1]s/data
DISABLE_SSH = true
START_SSH_SERVER = false
LFS_START_SERVER = false
OFFLINE_MODE = true

[database]
DB_TYPE = sqlite3
PATH = %[1]s/data/gitea.db

[repository]
ROOT = %[1]s/repositories
DEFAULT_BRANCH = main

[repository.signing]
SIGNING_KEY = none

[security]
INSTALL_LOCK = true
SECRET_KEY = %[3]s
INTERNAL_TOKEN = %[4]s
ALLOWED_HOST_LIST = loopback,private

[service]
DISABLE_REGISTRATION = true

[mailer]
ENABLED = false

[oauth2]
ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[queue]
TYPE = immediate

[actions]
ENABLED = false

[packages]
ENABLED = false

[cron.update_checker]
ENABLED = false

[log]
MODE = console
LEVEL = Info
ROOT_PATH = %[1]s/log
`, dir, port, randomHex(), randomHex(), host)
}

func randomHex() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// createAdmin creates AdminUser with Gitea's command line (the API needs an
// administrator to create users), then Token through the API with AdminUser's password.
func (s *Server) createAdmin() error {
	args := append(slices.Clone(s.wrap), s.bin, "--config", s.config, "--work-path", s.Dir, "admin", "user", "create",
		"--admin", "--username", AdminUser, "--password", AdminPassword, "--email", AdminUser+"@example.com",
		"--must-change-password=false")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir, cmd.Env = s.Dir, s.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("failed to create the admin user: %w\n%s", err, out)
	}
	var token struct {
		SHA1 string `json:"sha1"`
	}
	if err := s.do(http.MethodPost, "/users/"+AdminUser+"/tokens", map[string]any{"name": "tests", "scopes": []string{"all"}}, &token); err != nil {
		return fmt.Errorf("failed to create the admin's token: %w", err)
	}
	if token.SHA1 == "" {
		return errors.New("failed to create the admin's token: the answer holds none")
	}
	s.Token = token.SHA1
	return nil
}

func (s *Server) withLog(err error) error {
	b, _ := os.ReadFile(s.Log)
	return fmt.Errorf("%w; gitea's log:\n%s", err, b)
}

// API calls Gitea's API as AdminUser: method on path (below /api/v1, e.g.
// "/repos/o/r/pulls"), with in (when not nil) as the JSON body, decoding the answer into
// out (when not nil). It fails the test unless the answer is a success.
func (s *Server) API(method, path string, in, out any) {
	s.t.Helper()
	if err := s.do(method, path, in, out); err != nil {
		s.t.Fatal(err)
	}
}

// do authenticates with Token, or with AdminPassword until there is one.
func (s *Server) do(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("failed to encode the body of %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL+"/api/v1"+path, body)
	if err != nil {
		return fmt.Errorf("failed to make the request %s %s: %w", method, path, err)
	}
	if s.Token != "" {
		req.Header.Set("Authorization", "token "+s.Token)
	} else {
		req.SetBasicAuth(AdminUser, AdminPassword)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("failed to call %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("failed to read the answer to %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("failed to call %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("failed to decode the answer to %s %s: %w", method, path, err)
		}
	}
	return nil
}

// Repo is a repository of AdminUser.
type Repo struct {
	// Owner and Name name it: Owner/Name.
	Owner, Name string
	// CloneURL is its git smart HTTP URL, without credentials (anyone may fetch it).
	CloneURL string

	s *Server
	n int
}

// CreateRepo creates the public repository AdminUser/name with a first commit (a README)
// on its default branch, main.
func (s *Server) CreateRepo(name string) *Repo {
	s.t.Helper()
	var created struct {
		CloneURL string `json:"clone_url"`
	}
	s.API(http.MethodPost, "/user/repos", map[string]any{
		"name": name, "auto_init": true, "readme": "Default", "default_branch": "main",
	}, &created)
	return &Repo{Owner: AdminUser, Name: name, CloneURL: created.CloneURL, s: s}
}

// Repo returns the existing repository owner/name (another user's, a fork): AdminUser may
// push to it as to its own.
func (s *Server) Repo(owner, name string) *Repo {
	s.t.Helper()
	var got struct {
		CloneURL string `json:"clone_url"`
	}
	s.API(http.MethodGet, "/repos/"+owner+"/"+name, nil, &got)
	return &Repo{Owner: owner, Name: name, CloneURL: got.CloneURL, s: s}
}

func (r *Repo) path() string { return "/repos/" + r.Owner + "/" + r.Name }

// AuthURL is CloneURL with AdminUser and Token as its credentials, for pushes.
func (r *Repo) AuthURL() string {
	u, err := url.Parse(r.CloneURL)
	if err != nil {
		r.s.t.Fatalf("failed to parse the clone URL %q: %v", r.CloneURL, err)
	}
	u.User = url.UserPassword(AdminUser, r.s.Token)
	return u.String()
}

// Push commits files (an empty content deletes the file) onto branch and pushes the
// commit over git's smart HTTP. A branch that does not exist yet starts from branch from.
// It returns the commit's SHA.
func (r *Repo) Push(branch, from string, files map[string]string) string {
	t := r.s.t
	t.Helper()
	r.n++
	g := newGit(t)
	g.run("init", "--quiet", "--initial-branch="+branch)
	start := branch
	if !g.ok("ls-remote", "--exit-code", "--heads", r.AuthURL(), branch) {
		start = from
	}
	g.run("fetch", "--quiet", r.AuthURL(), "refs/heads/"+start)
	g.run("checkout", "--quiet", "-B", branch, "FETCH_HEAD")
	for name, content := range files {
		p := filepath.Join(g.dir, filepath.FromSlash(name))
		if content == "" {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g.run("add", "--all")
	g.run("commit", "--quiet", "--allow-empty", "-m", fmt.Sprintf("%s: commit %d", branch, r.n))
	g.run("push", "--quiet", r.AuthURL(), "HEAD:refs/heads/"+branch)
	return g.run("rev-parse", "HEAD")
}

// BranchHead returns the SHA of branch's head, as the API reports it.
func (r *Repo) BranchHead(branch string) string {
	r.s.t.Helper()
	var b struct {
		Commit struct {
			ID string `json:"id"`
		} `json:"commit"`
	}
	r.s.API(http.MethodGet, r.path()+"/branches/"+url.PathEscape(branch), nil, &b)
	return b.Commit.ID
}

// PullRequest is what the API reports of a pull request.
type PullRequest struct {
	Number int64  `json:"number"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	// State is "open" or "closed".
	State  string `json:"state"`
	Merged bool   `json:"merged"`
	URL    string `json:"html_url"`
	Head   Ref    `json:"head"`
	Base   Ref    `json:"base"`
}

// Ref is a pull request's head or base.
type Ref struct {
	Ref string `json:"ref"`
	SHA string `json:"sha"`
}

// OpenPullRequest opens a pull request of branch head into base.
func (r *Repo) OpenPullRequest(head, base, title, body string) PullRequest {
	r.s.t.Helper()
	var pr PullRequest
	r.s.API(http.MethodPost, r.path()+"/pulls", map[string]any{"head": head, "base": base, "title": title, "body": body}, &pr)
	return pr
}

// PullRequest returns pull request number.
func (r *Repo) PullRequest(number int64) PullRequest {
	r.s.t.Helper()
	var pr PullRequest
	r.s.API(http.MethodGet, fmt.Sprintf("%s/pulls/%d", r.path(), number), nil, &pr)
	return pr
}

// ClosePullRequest closes pull request number without merging it.
func (r *Repo) ClosePullRequest(number int64) {
	r.s.t.Helper()
	r.s.API(http.MethodPatch, fmt.Sprintf("%s/pulls/%d", r.path(), number), map[string]any{"state": "closed"}, nil)
}

// Comment is a comment on an issue or pull request.
type Comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User struct {
		Login string `json:"login"`
	} `json:"user"`
}

// Comment comments body on issue or pull request number, as AdminUser.
func (r *Repo) Comment(number int64, body string) Comment {
	r.s.t.Helper()
	var c Comment
	r.s.API(http.MethodPost, fmt.Sprintf("%s/issues/%d/comments", r.path(), number), map[string]any{"body": body}, &c)
	return c
}

// Comments returns the comments on issue or pull request number, oldest first.
func (r *Repo) Comments(number int64) []Comment {
	r.s.t.Helper()
	var cs []Comment
	r.s.API(http.MethodGet, fmt.Sprintf("%s/issues/%d/comments", r.path(), number), nil, &cs)
	return cs
}

// CommitStatus is a status of a commit.
type CommitStatus struct {
	// State is pending, success, error, failure or warning.
	State       string `json:"status"`
	Context     string `json:"context"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
}

// SetCommitStatus adds st to commit sha's statuses.
func (r *Repo) SetCommitStatus(sha string, st CommitStatus) {
	r.s.t.Helper()
	r.s.API(http.MethodPost, r.path()+"/statuses/"+sha, map[string]any{
		"state": st.State, "context": st.Context, "description": st.Description, "target_url": st.TargetURL,
	}, nil)
}

// CommitStatuses returns every status of commit sha, newest first (a context set twice
// is listed twice).
func (r *Repo) CommitStatuses(sha string) []CommitStatus {
	r.s.t.Helper()
	var sts []CommitStatus
	// leastindex is Gitea's name for the highest index first (the order they were set
	// in); the default, newest first, orders statuses of the same second as it likes.
	r.s.API(http.MethodGet, r.path()+"/statuses/"+sha+"?sort=leastindex&limit=50", nil, &sts)
	return sts
}

// AddWebhook adds a webhook delivering events (Gitea's names: "push", "pull_request",
// "issue_comment", "status", ...) to target as JSON, signed with secret (the hex
// HMAC-SHA256 of the body, in X-Gitea-Signature). It returns its ID. "pull_request"
// chooses every pull request event, comments on them included, which arrive with
// X-Gitea-Event issue_comment.
func (r *Repo) AddWebhook(target, secret string, events ...string) int64 {
	r.s.t.Helper()
	var hook struct {
		ID int64 `json:"id"`
	}
	r.s.API(http.MethodPost, r.path()+"/hooks", map[string]any{
		"type":   "gitea",
		"active": true,
		"events": events,
		"config": map[string]string{"url": target, "content_type": "json", "secret": secret},
	}, &hook)
	return hook.ID
}

// git runs the git CLI in a work tree of its own, with no configuration but a committer.
type git struct {
	t   testing.TB
	dir string
	env []string
}

func newGit(t testing.TB) *git {
	home := t.TempDir()
	return &git{t: t, dir: t.TempDir(), env: append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
	)}
}

func (g *git) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = g.dir, g.env
	return cmd
}

func (g *git) run(args ...string) string {
	g.t.Helper()
	out, err := g.cmd(args...).CombinedOutput()
	if err != nil {
		g.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// ok runs git and reports whether it succeeded.
func (g *git) ok(args ...string) bool { return g.cmd(args...).Run() == nil }
