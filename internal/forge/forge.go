package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Kind names a forge's API.
type Kind string

// The forges Stackwright speaks to. Gitea's API is also Forgejo's.
const (
	Gitea  Kind = "Gitea"
	GitHub Kind = "GitHub"
	GitLab Kind = "GitLab"
)

// Bounds on what a forge may make the manager read.
const (
	// maxResponseBytes is the most one response body may hold.
	maxResponseBytes = 4 << 20
	// maxPages is the most pages one listing reads; what lies beyond is not seen.
	maxPages = 20
	// pageSize is the items asked for per page (every forge here allows it).
	pageSize = 50
	// maxCommentBytes keeps a comment under every forge's limit (GitHub's is 65,536
	// characters).
	maxCommentBytes = 60000
	// maxDescription is GitHub's limit on a commit status's description.
	maxDescription = 140
	// maxRetryAfter is the longest wait a forge may ask for (GitHub's rate limits reset
	// within the hour, GitLab's within the minute).
	maxRetryAfter = time.Hour
)

// PullRequest is an open pull (or merge) request as the generator needs it.
type PullRequest struct {
	Number int
	Title  string
	Author string
	Labels []string
	// BaseBranch is the branch it targets.
	BaseBranch string
	// HeadBranch is its source branch (in the fork, for a fork's).
	HeadBranch string
	HeadSHA    string
	// HeadRef is the ref the base repository keeps of its head (refs/pull/N/head, or
	// GitLab's refs/merge-requests/N/head): a fork's commits are fetched from there.
	HeadRef string
	// Fork is true when its head lives in another repository.
	Fork bool
}

// State is a commit status's state.
type State string

// The commit status states Stackwright sets.
const (
	StatePending State = "pending"
	StateSuccess State = "success"
	StateFailure State = "failure"
)

// Status is a commit status on a pull request's head.
type Status struct {
	State State
	// Context names the check; one per Stack.
	Context     string
	Description string
	TargetURL   string
}

// Client speaks to one repository of one forge.
type Client interface {
	// PullRequests lists the repository's open pull requests.
	PullRequests(ctx context.Context) ([]PullRequest, error)
	// UpsertComment makes body the one comment of the token's user on pull request number
	// that carries marker: it edits the first such comment, deletes any other (a comment
	// found twice is healed to one), or creates it.
	UpsertComment(ctx context.Context, number int, marker, body string) error
	// SetStatus sets a commit status on sha.
	SetStatus(ctx context.Context, sha string, s Status) error
}

// Options say where a repository is and how to reach it.
type Options struct {
	Kind Kind
	// API is the forge's API base URL: https://api.github.com, https://gitlab.com/api/v4,
	// https://gitea.example.com/api/v1.
	API string
	// Repository is owner/name (GitLab: the project's full path).
	Repository string
	Token      string
	HTTP       *http.Client
}

// New returns the client of o's forge.
func New(o Options) (Client, error) {
	base, err := url.Parse(o.API)
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, fmt.Errorf("forge API %q is not an http(s) URL", o.API)
	}
	owner, name, ok := strings.Cut(o.Repository, "/")
	if !ok || owner == "" || name == "" {
		return nil, fmt.Errorf("repository %q is not owner/name", o.Repository)
	}
	hc := o.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	// A forge's redirect would take the token elsewhere.
	noRedirect := *hc
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	a := &api{base: strings.TrimRight(base.String(), "/"), http: &noRedirect, token: o.Token}
	switch o.Kind {
	case Gitea:
		a.auth = func(h http.Header) { h.Set("Authorization", "token "+o.Token) }
		return &hub{api: a, repo: "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name), pageParam: "limit", fullName: o.Repository}, nil
	case GitHub:
		a.auth = func(h http.Header) {
			h.Set("Authorization", "Bearer "+o.Token)
			h.Set("Accept", "application/vnd.github+json")
			h.Set("X-GitHub-Api-Version", "2022-11-28")
		}
		return &hub{api: a, repo: "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name), pageParam: "per_page", pagedComments: true, fullName: o.Repository}, nil
	case GitLab:
		a.auth = func(h http.Header) { h.Set("PRIVATE-TOKEN", o.Token) }
		return &lab{api: a, project: "/projects/" + url.PathEscape(o.Repository)}, nil
	default:
		return nil, fmt.Errorf("forge %q is not one of Gitea, GitHub, GitLab", o.Kind)
	}
}

// APIError is a forge's refusal.
type APIError struct {
	Method, Path string
	Status       int
	// Message is the start of what the forge said.
	Message string
	// RetryAfter is when the forge said to come back (rate limits), zero if it did not.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, e.Message)
}

// Retryable reports whether err may pass by itself: the forge's rate limit, its own
// failures, or the network. A refusal of the request (401, 403, 404, 422) is not.
func Retryable(err error) bool {
	var e *APIError
	if !errors.As(err, &e) {
		return true
	}
	return e.RetryAfter > 0 || e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// RetryAfter is how long the forge asked to wait before the next request, if it did.
func RetryAfter(err error) time.Duration {
	var e *APIError
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// api is the HTTP conversation with one forge's API.
type api struct {
	base string
	auth func(http.Header)
	http *http.Client
	// token is kept out of what a forge's answer puts in an error (a proxy that echoes
	// the request): errors end in the set's status and events, which more may read than
	// the token's Secret.
	token string
}

// do sends a request to path (relative to the API base) and decodes a JSON answer into
// out, when out is not nil.
func (a *api) do(ctx context.Context, method, path string, in, out any) (http.Header, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("failed to encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("failed to build request: %w", err)
	}
	a.auth(req.Header)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		// The URL holds no secret, but the error names it; say only what failed.
		return nil, fmt.Errorf("%s %s: %w", method, pathOnly(path), unwrapURL(err))
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: failed to read answer: %w", method, pathOnly(path), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &APIError{Method: method, Path: pathOnly(path), Status: resp.StatusCode, Message: excerpt(a.redact(b)), RetryAfter: retryAfter(resp)}
	}
	if len(b) > maxResponseBytes {
		return nil, fmt.Errorf("%s %s: answer larger than %d bytes", method, pathOnly(path), maxResponseBytes)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("%s %s: failed to decode answer: %w", method, pathOnly(path), err)
		}
	}
	return resp.Header, nil
}

// redact replaces the token in b, before anything cuts b.
func (a *api) redact(b []byte) []byte {
	if a.token == "" {
		return b
	}
	return bytes.ReplaceAll(b, []byte(a.token), []byte("[token]"))
}

// pages calls fetch for page 1, 2, ... until a page is short or maxPages were read.
func pages(fetch func(page int) (n int, err error)) error {
	for page := 1; page <= maxPages; page++ {
		n, err := fetch(page)
		if err != nil || n < pageSize {
			return err
		}
	}
	return nil
}

// ids are the IDs of the comments found, in the order first found: a comment that a
// listing shows twice (a forge that ignores the page asked, an offset shifted between two
// pages) is one comment, not a duplicate to delete.
type ids struct {
	list []int64
	seen map[int64]bool
}

func (s *ids) add(id int64) {
	if s.seen[id] {
		return
	}
	if s.seen == nil {
		s.seen = map[int64]bool{}
	}
	s.seen[id] = true
	s.list = append(s.list, id)
}

func pathOnly(p string) string {
	p, _, _ = strings.Cut(p, "?")
	return p
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func excerpt(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// retryAfter reads the forge's rate-limit answer: Retry-After, or a spent limit's reset
// time (GitHub's x-ratelimit-*, GitLab's RateLimit-*), at most maxRetryAfter.
func retryAfter(resp *http.Response) time.Duration {
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
			// Compared in seconds: a large n times a second overflows.
			return time.Duration(min(n, int64(maxRetryAfter/time.Second))) * time.Second
		}
	}
	for _, p := range []string{"X-Ratelimit-", "Ratelimit-"} {
		if resp.Header.Get(p+"Remaining") != "0" {
			continue
		}
		if n, err := strconv.ParseInt(resp.Header.Get(p+"Reset"), 10, 64); err == nil {
			if d := time.Until(time.Unix(n, 0)); d > 0 {
				return min(d, maxRetryAfter)
			}
			return time.Second
		}
	}
	return 0
}

// clip bounds a comment's body, keeping its marker (which comes first).
func clip(body string) string {
	if len(body) <= maxCommentBytes {
		return body
	}
	cut := maxCommentBytes
	for cut > 0 && !isRuneStart(body[cut]) {
		cut--
	}
	return body[:cut] + "\n\n… (cut: the preview is longer than a comment may be)"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func clipDescription(s string) string {
	if len(s) <= maxDescription {
		return s
	}
	cut := maxDescription - len("…")
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
