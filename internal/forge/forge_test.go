package forge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The fake forges below answer with the fixtures of testdata (see its README for where
// each shape comes from) and record what the client sent.

// testToken is the token every client here is given: no error may show it.
const testToken = "swtok_4f9c2e7a1b8d0356"

// spec is one forge as the tests set it up.
type spec struct {
	kind Kind
	// prefix is the API base's path on the fake server.
	prefix string
	repo   string
	// repoPath is where the repository lives in the API, as the client must send it
	// (escaped).
	repoPath string
	// dir holds the forge's fixtures in testdata.
	dir string
}

var (
	giteaSpec = spec{
		kind: Gitea, prefix: "/api/v1", repo: "platform/infra",
		repoPath: "/api/v1/repos/platform/infra", dir: "gitea",
	}
	githubSpec = spec{
		kind: GitHub, prefix: "", repo: "octo-org/hello-world",
		repoPath: "/repos/octo-org/hello-world", dir: "github",
	}
	gitlabSpec = spec{
		kind: GitLab, prefix: "/api/v4", repo: "acme/platform/infra",
		repoPath: "/api/v4/projects/acme%2Fplatform%2Finfra", dir: "gitlab",
	}
	allSpecs = []spec{giteaSpec, githubSpec, gitlabSpec}
	hubSpecs = []spec{giteaSpec, githubSpec}
)

// pulls is the path of the repository's pull (merge) requests.
func (s spec) pulls() string {
	if s.kind == GitLab {
		return s.repoPath + "/merge_requests"
	}
	return s.repoPath + "/pulls"
}

// comments is the path of pull request number's comments (GitLab: notes).
func (s spec) comments(number int) string {
	if s.kind == GitLab {
		return fmt.Sprintf("%s/merge_requests/%d/notes", s.repoPath, number)
	}
	return fmt.Sprintf("%s/issues/%d/comments", s.repoPath, number)
}

// comment is the path of one comment, as the client edits or deletes it.
func (s spec) comment(number int, id int64) string {
	if s.kind == GitLab {
		return fmt.Sprintf("%s/%d", s.comments(number), id)
	}
	return fmt.Sprintf("%s/issues/comments/%d", s.repoPath, id)
}

// pageQuery is the query of a listing's page.
func (s spec) pageQuery(page int, extra ...string) url.Values {
	size := "per_page"
	if s.kind == Gitea {
		size = "limit"
	}
	q := url.Values{size: {"50"}, "page": {strconv.Itoa(page)}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return q
}

func (s spec) fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", s.dir, name))
	if err != nil {
		t.Fatalf("reading fixture: %v", err)
	}
	return b
}

// call is what a fake forge saw of one request.
type call struct {
	Method string
	// Path is the path as it came on the wire, escaped.
	Path  string
	Query url.Values
	// Body is the request's JSON body, decoded; nil when it had none.
	Body any
}

// reply is a fake forge's answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

type handler func(r *http.Request) reply

// answer always answers status with body.
func answer(status int, body []byte) handler {
	return func(*http.Request) reply { return reply{status: status, body: body} }
}

// paged answers a listing's page n with pages[n-1].
func paged(t *testing.T, pages ...[]byte) handler {
	return func(r *http.Request) reply {
		n, err := strconv.Atoi(r.URL.Query().Get("page"))
		if err != nil || n < 1 || n > len(pages) {
			t.Errorf("%s %s: unexpected page", r.Method, r.URL)
			return reply{status: http.StatusOK, body: []byte("[]")}
		}
		return reply{status: http.StatusOK, body: pages[n-1]}
	}
}

// fakeForge serves routes ("METHOD /escaped/path") and records the requests.
type fakeForge struct {
	t      *testing.T
	srv    *httptest.Server
	routes map[string]handler

	mu       sync.Mutex
	calls    []call
	headers  []http.Header
	rawPaths []string
}

func newFake(t *testing.T, routes map[string]handler) *fakeForge {
	t.Helper()
	f := &fakeForge{t: t, routes: routes}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeForge) serve(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("reading the request: %v", err)
	}
	var body any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &body); err != nil {
			f.t.Errorf("%s %s: the body is not JSON: %v", r.Method, r.URL, err)
		}
	}
	key := r.Method + " " + r.URL.EscapedPath()
	f.mu.Lock()
	f.calls = append(f.calls, call{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.Query(), Body: body})
	f.headers = append(f.headers, r.Header.Clone())
	f.rawPaths = append(f.rawPaths, r.URL.RawPath)
	h := f.routes[key]
	f.mu.Unlock()
	if h == nil {
		f.t.Errorf("unexpected request %s", key)
		http.NotFound(w, r)
		return
	}
	rep := h(r)
	for k, v := range rep.header {
		w.Header()[k] = v
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}

func (f *fakeForge) seen() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func (f *fakeForge) client(t *testing.T, s spec) Client {
	t.Helper()
	c, err := New(Options{Kind: s.kind, API: f.srv.URL + s.prefix, Repository: s.repo, Token: testToken, HTTP: f.srv.Client()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// clones makes n copies of the first item of a fixture's JSON array, passing the i-th to
// set: the full pages that come before a fixture's short one.
func clones(t *testing.T, fixture []byte, n int, set func(item map[string]any, i int)) []byte {
	t.Helper()
	var items []json.RawMessage
	if err := json.Unmarshal(fixture, &items); err != nil || len(items) == 0 {
		t.Fatalf("fixture is not a JSON array of items: %v", err)
	}
	out := make([]map[string]any, n)
	for i := range out {
		if err := json.Unmarshal(items[0], &out[i]); err != nil {
			t.Fatal(err)
		}
		set(out[i], i)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// concat joins JSON arrays.
func concat(t *testing.T, arrays ...[]byte) []byte {
	t.Helper()
	var all []json.RawMessage
	for _, a := range arrays {
		var items []json.RawMessage
		if err := json.Unmarshal(a, &items); err != nil {
			t.Fatal(err)
		}
		all = append(all, items...)
	}
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

var equateEmpty = cmpopts.EquateEmpty()

const (
	shaA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
	shaB = "c3d0be41ecbe669545ee3e94d31ed9a4bc91ee3c"
	shaC = "e5bd3914e2e596debea16f433f57875b5b90bcd6"
)

// fillers are the pull requests of clones of the fixture's first one.
func fillers(first PullRequest, from, n int, headRef string) []PullRequest {
	out := make([]PullRequest, n)
	for i := range out {
		out[i] = first
		out[i].Number = from + i
		out[i].HeadRef = fmt.Sprintf(headRef, from+i)
	}
	return out
}

func TestHub_PullRequests_PagesAndForks(t *testing.T) {
	for _, tc := range []struct {
		s spec
		// want is what the fixture's page says.
		want []PullRequest
	}{{
		s: giteaSpec,
		want: []PullRequest{
			{
				Number: 3, Title: "Preview environment for the login page", Author: "alice", Labels: []string{"preview", "kind/feature"},
				BaseBranch: "main", HeadBranch: "feature/login-page", HeadSHA: shaA, HeadRef: "refs/pull/3/head",
			},
			// From a fork: its head repository is another.
			{
				Number: 4, Title: "Fix the README's install steps", Author: "bob",
				BaseBranch: "main", HeadBranch: "patch-1", HeadSHA: shaB, HeadRef: "refs/pull/4/head", Fork: true,
			},
			// From a fork since deleted: no head repository, and Gitea's head.ref is the
			// base's refs/pull/5/head; the branch is in head.label.
			{
				Number: 5, Title: "Typo in the Stack's name", Author: "carol", Labels: []string{"preview"},
				BaseBranch: "main", HeadBranch: "typo", HeadSHA: shaC, HeadRef: "refs/pull/5/head", Fork: true,
			},
		},
	}, {
		s: githubSpec,
		want: []PullRequest{
			{
				Number: 7, Title: "Preview environment for the login page", Author: "octocat", Labels: []string{"preview", "bug"},
				BaseBranch: "main", HeadBranch: "feature/login-page", HeadSHA: shaA, HeadRef: "refs/pull/7/head",
			},
			{
				Number: 8, Title: "Fix the README's install steps", Author: "hubot",
				BaseBranch: "main", HeadBranch: "patch-1", HeadSHA: shaB, HeadRef: "refs/pull/8/head", Fork: true,
			},
			{
				Number: 9, Title: "Typo in the Stack's name", Author: "ghost", Labels: []string{"preview"},
				BaseBranch: "main", HeadBranch: "typo", HeadSHA: shaC, HeadRef: "refs/pull/9/head", Fork: true,
			},
		},
	}} {
		t.Run(string(tc.s.kind), func(t *testing.T) {
			fixture := tc.s.fixture(t, "pulls.json")
			full := clones(t, fixture, pageSize, func(p map[string]any, i int) { p["number"] = 101 + i })
			f := newFake(t, map[string]handler{"GET " + tc.s.pulls(): paged(t, full, fixture)})

			got, err := f.client(t, tc.s).PullRequests(t.Context())
			if err != nil {
				t.Fatalf("PullRequests: %v", err)
			}
			want := append(fillers(tc.want[0], 101, pageSize, "refs/pull/%d/head"), tc.want...)
			if diff := cmp.Diff(want, got, equateEmpty); diff != "" {
				t.Errorf("pull requests (-want +got):\n%s", diff)
			}
			wantCalls := []call{
				{Method: http.MethodGet, Path: tc.s.pulls(), Query: tc.s.pageQuery(1, "state", "open")},
				{Method: http.MethodGet, Path: tc.s.pulls(), Query: tc.s.pageQuery(2, "state", "open")},
			}
			if diff := cmp.Diff(wantCalls, f.seen(), equateEmpty); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLab_PullRequests_PagesAndForks(t *testing.T) {
	s := gitlabSpec
	fixture := s.fixture(t, "merge_requests.json")
	full := clones(t, fixture, pageSize, func(m map[string]any, i int) { m["iid"] = 101 + i })
	f := newFake(t, map[string]handler{"GET " + s.pulls(): paged(t, full, fixture)})

	got, err := f.client(t, s).PullRequests(t.Context())
	if err != nil {
		t.Fatalf("PullRequests: %v", err)
	}
	first := PullRequest{
		Number: 12, Title: "Preview environment for the login page", Author: "jdoe", Labels: []string{"preview", "backend"},
		BaseBranch: "main", HeadBranch: "feature/login-page", HeadSHA: shaA, HeadRef: "refs/merge-requests/12/head",
	}
	want := append(fillers(first, 101, pageSize, "refs/merge-requests/%d/head"), first,
		// From a fork: its source project is not the target.
		PullRequest{
			Number: 13, Title: "Fix the README's install steps", Author: "contrib",
			BaseBranch: "main", HeadBranch: "patch-1", HeadSHA: shaB, HeadRef: "refs/merge-requests/13/head", Fork: true,
		})
	if diff := cmp.Diff(want, got, equateEmpty); diff != "" {
		t.Errorf("merge requests (-want +got):\n%s", diff)
	}
	wantCalls := []call{
		{Method: http.MethodGet, Path: s.pulls(), Query: s.pageQuery(1, "state", "opened")},
		{Method: http.MethodGet, Path: s.pulls(), Query: s.pageQuery(2, "state", "opened")},
	}
	if diff := cmp.Diff(wantCalls, f.seen(), equateEmpty); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestClient_PullRequests_ReadsAtMostMaxPages(t *testing.T) {
	for _, s := range allSpecs {
		t.Run(string(s.kind), func(t *testing.T) {
			name, key := "pulls.json", "number"
			if s.kind == GitLab {
				name, key = "merge_requests.json", "iid"
			}
			full := clones(t, s.fixture(t, name), pageSize, func(p map[string]any, i int) { p[key] = 100 + i })
			f := newFake(t, map[string]handler{"GET " + s.pulls(): answer(http.StatusOK, full)})

			got, err := f.client(t, s).PullRequests(t.Context())
			if err != nil {
				t.Fatalf("PullRequests: %v", err)
			}
			if len(f.seen()) != maxPages || len(got) != maxPages*pageSize {
				t.Errorf("read %d pages, %d pull requests; want %d, %d", len(f.seen()), len(got), maxPages, maxPages*pageSize)
			}
		})
	}
}

func TestLab_ProjectPath_KeepsEncodedSlashes(t *testing.T) {
	s := gitlabSpec
	f := newFake(t, map[string]handler{
		"GET " + s.pulls():                         answer(http.StatusOK, []byte("[]")),
		"GET /api/v4/user":                         answer(http.StatusOK, s.fixture(t, "user.json")),
		"GET " + s.comments(12):                    answer(http.StatusOK, []byte("[]")),
		"POST " + s.comments(12):                   answer(http.StatusCreated, s.fixture(t, "note.json")),
		"POST " + s.repoPath + "/statuses/" + shaA: answer(http.StatusCreated, s.fixture(t, "status.json")),
	})
	c := f.client(t, s)
	if _, err := c.PullRequests(t.Context()); err != nil {
		t.Fatalf("PullRequests: %v", err)
	}
	if err := c.UpsertComment(t.Context(), 12, "<!-- m -->", "<!-- m -->\nhello"); err != nil {
		t.Fatalf("UpsertComment: %v", err)
	}
	if err := c.SetStatus(t.Context(), shaA, Status{State: StatePending, Context: "stackwright/preview-7"}); err != nil {
		t.Fatalf("SetStatus: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, raw := range f.rawPaths {
		if f.calls[i].Path == "/api/v4/user" {
			continue
		}
		// net/http sends the path as escaped (URL.RawPath): GitLab must see one project
		// ID, not a path of three segments.
		if !strings.HasPrefix(raw, s.repoPath+"/") {
			t.Errorf("request %d: the server saw RawPath %q, want it under %s", i, raw, s.repoPath)
		}
	}
	if len(f.rawPaths) != 5 {
		t.Errorf("%d requests, want 5", len(f.rawPaths))
	}
}

// commentRoutes are a forge's routes for writing comments on pull request number: every
// comment of the fixture may be edited or deleted.
func commentRoutes(t *testing.T, s spec, number int) map[string]handler {
	created, edit := "comment.json", http.MethodPatch
	ids := []int64{1001, 1002, 1003, 1004, 1005}
	if s.kind == GitLab {
		created, edit = "note.json", http.MethodPut
		ids = []int64{2001, 2002, 2003, 2004, 2005, 2006}
	}
	routes := map[string]handler{
		"GET " + s.prefix + "/user":  answer(http.StatusOK, s.fixture(t, "user.json")),
		"POST " + s.comments(number): answer(http.StatusCreated, s.fixture(t, created)),
	}
	for _, id := range ids {
		routes[edit+" "+s.comment(number, id)] = answer(http.StatusOK, s.fixture(t, created))
		routes["DELETE "+s.comment(number, id)] = answer(http.StatusNoContent, nil)
	}
	return routes
}

// commentListing serves pull request number's comments as forge s does, and returns the
// requests the client must make to read them all.
func commentListing(t *testing.T, s spec, number int) (handler, []call) {
	name, sort := "comments.json", []string(nil)
	if s.kind == GitLab {
		name, sort = "notes.json", []string{"sort", "asc", "order_by", "created_at"}
	}
	fixture := s.fixture(t, name)
	// A full page of other users' comments, then the fixture's.
	full := clones(t, fixture, pageSize, func(c map[string]any, i int) {
		c["id"] = 500 + i
		c["body"] = fmt.Sprintf("Comment %d", i)
	})
	if s.kind == Gitea {
		// Gitea's list of an issue's comments has no paging: it answers every comment,
		// whatever the query.
		return answer(http.StatusOK, concat(t, full, fixture)), []call{
			{Method: http.MethodGet, Path: s.comments(number)},
		}
	}
	return paged(t, full, fixture), []call{
		{Method: http.MethodGet, Path: s.comments(number), Query: s.pageQuery(1, sort...)},
		{Method: http.MethodGet, Path: s.comments(number), Query: s.pageQuery(2, sort...)},
	}
}

func marker(stack string) string { return "<!-- stackwright:feedback team-a/" + stack + " -->" }

func TestClient_UpsertComment_OwnCommentByMarker(t *testing.T) {
	type write struct {
		method string
		id     int64 // 0: the pull request's comments
	}
	for _, tc := range []struct {
		name  string
		stack string
		// want are the writes after the listing, by forge.
		want map[Kind][]write
	}{{
		name:  "creates it when there is none",
		stack: "preview-9",
		want: map[Kind][]write{
			Gitea:  {{method: http.MethodPost}},
			GitHub: {{method: http.MethodPost}},
			GitLab: {{method: http.MethodPost}},
		},
	}, {
		name:  "ignores another user's comment carrying the marker",
		stack: "preview-3",
		want: map[Kind][]write{
			Gitea:  {{method: http.MethodPost}},
			GitHub: {{method: http.MethodPost}},
			GitLab: {{method: http.MethodPost}},
		},
	}, {
		name:  "ignores system notes carrying the marker",
		stack: "preview-4",
		want: map[Kind][]write{
			GitLab: {{method: http.MethodPost}},
		},
	}, {
		name:  "edits its own comment",
		stack: "preview-8",
		want: map[Kind][]write{
			Gitea:  {{method: http.MethodPatch, id: 1002}},
			GitHub: {{method: http.MethodPatch, id: 1002}},
			GitLab: {{method: http.MethodPut, id: 2002}},
		},
	}, {
		name:  "edits the first of its own comments and deletes the others",
		stack: "preview-7",
		want: map[Kind][]write{
			Gitea:  {{method: http.MethodPatch, id: 1003}, {method: http.MethodDelete, id: 1005}},
			GitHub: {{method: http.MethodPatch, id: 1003}, {method: http.MethodDelete, id: 1005}},
			GitLab: {{method: http.MethodPut, id: 2003}, {method: http.MethodDelete, id: 2006}},
		},
	}} {
		for _, s := range allSpecs {
			writes, ok := tc.want[s.kind]
			if !ok {
				continue
			}
			t.Run(string(s.kind)+"/"+tc.name, func(t *testing.T) {
				const number = 7
				routes := commentRoutes(t, s, number)
				list, listing := commentListing(t, s, number)
				routes["GET "+s.comments(number)] = list
				f := newFake(t, routes)

				body := marker(tc.stack) + "\n### Stackwright: " + tc.stack + "\nPreview of 6dcb09b5b578 succeeded"
				if err := f.client(t, s).UpsertComment(t.Context(), number, marker(tc.stack), body); err != nil {
					t.Fatalf("UpsertComment: %v", err)
				}
				want := append([]call{{Method: http.MethodGet, Path: s.prefix + "/user"}}, listing...)
				for _, w := range writes {
					c := call{Method: w.method, Path: s.comments(number)}
					if w.id != 0 {
						c.Path = s.comment(number, w.id)
					}
					if w.method != http.MethodDelete {
						c.Body = map[string]any{"body": body}
					}
					want = append(want, c)
				}
				if diff := cmp.Diff(want, f.seen(), equateEmpty); diff != "" {
					t.Errorf("requests (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestClient_UpsertComment_CommentListedTwiceIsOne(t *testing.T) {
	// The last comment of page 1 is listed again on page 2 (one before it was deleted
	// meanwhile): it is edited, not also deleted as its own duplicate.
	for _, tc := range []struct {
		s        spec
		name     string
		own      map[string]any
		id, dup  int64
		editWith string
	}{
		{s: githubSpec, name: "comments.json", own: map[string]any{"user": map[string]any{"login": "stackwright-bot", "id": 5830011}}, id: 1003, dup: 1005, editWith: http.MethodPatch},
		{s: gitlabSpec, name: "notes.json", own: map[string]any{"author": map[string]any{"id": 77, "username": "stackwright-bot"}}, id: 2003, dup: 2006, editWith: http.MethodPut},
	} {
		t.Run(string(tc.s.kind), func(t *testing.T) {
			fixture := tc.s.fixture(t, tc.name)
			full := clones(t, fixture, pageSize, func(c map[string]any, i int) {
				c["id"], c["body"] = 500+i, fmt.Sprintf("Comment %d", i)
				if i == pageSize-1 {
					c["id"], c["body"] = tc.id, marker("preview-7")
					for k, v := range tc.own {
						c[k] = v
					}
				}
			})
			routes := commentRoutes(t, tc.s, 7)
			routes["GET "+tc.s.comments(7)] = paged(t, full, fixture)
			f := newFake(t, routes)
			if err := f.client(t, tc.s).UpsertComment(t.Context(), 7, marker("preview-7"), marker("preview-7")); err != nil {
				t.Fatalf("UpsertComment: %v", err)
			}
			calls := f.seen()
			want := []call{
				{Method: tc.editWith, Path: tc.s.comment(7, tc.id), Body: map[string]any{"body": marker("preview-7")}},
				{Method: http.MethodDelete, Path: tc.s.comment(7, tc.dup)},
			}
			if diff := cmp.Diff(want, calls[min(3, len(calls)):], equateEmpty); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClient_UpsertComment_AsksTheUserOnce(t *testing.T) {
	for _, s := range allSpecs {
		t.Run(string(s.kind), func(t *testing.T) {
			routes := commentRoutes(t, s, 7)
			routes["GET "+s.comments(7)] = answer(http.StatusOK, []byte("[]"))
			f := newFake(t, routes)
			c := f.client(t, s)
			for range 2 {
				if err := c.UpsertComment(t.Context(), 7, marker("preview-9"), marker("preview-9")); err != nil {
					t.Fatalf("UpsertComment: %v", err)
				}
			}
			users := 0
			for _, c := range f.seen() {
				if c.Path == s.prefix+"/user" {
					users++
				}
			}
			if users != 1 {
				t.Errorf("asked for the token's user %d times, want once", users)
			}
		})
	}
}

func TestClient_UpsertComment_ClipsALongBody(t *testing.T) {
	for _, s := range allSpecs {
		t.Run(string(s.kind), func(t *testing.T) {
			routes := commentRoutes(t, s, 7)
			routes["GET "+s.comments(7)] = answer(http.StatusOK, []byte("[]"))
			f := newFake(t, routes)
			body := marker("preview-9") + "\n" + strings.Repeat("ü", maxCommentBytes)
			if err := f.client(t, s).UpsertComment(t.Context(), 7, marker("preview-9"), body); err != nil {
				t.Fatalf("UpsertComment: %v", err)
			}
			calls := f.seen()
			sent, _ := calls[len(calls)-1].Body.(map[string]any)["body"].(string)
			if len(sent) > maxCommentBytes+100 || !utf8.ValidString(sent) || !strings.HasPrefix(sent, marker("preview-9")) || !strings.HasSuffix(sent, "(cut: the preview is longer than a comment may be)") {
				t.Errorf("sent a body of %d bytes (valid UTF-8: %t) starting %.60q and ending %q", len(sent), utf8.ValidString(sent), sent, sent[max(0, len(sent)-60):])
			}
		})
	}
}

func TestClient_UpsertComment_UserRefused(t *testing.T) {
	for _, s := range allSpecs {
		t.Run(string(s.kind), func(t *testing.T) {
			f := newFake(t, map[string]handler{"GET " + s.prefix + "/user": answer(http.StatusUnauthorized, s.fixture(t, "error-401.json"))})
			err := f.client(t, s).UpsertComment(t.Context(), 7, marker("preview-9"), marker("preview-9"))
			var e *APIError
			if !errors.As(err, &e) || e.Status != http.StatusUnauthorized || e.Path != "/user" || Retryable(err) {
				t.Errorf("UpsertComment: %v, want a 401 of GET /user that is not retryable", err)
			}
			if len(f.seen()) != 1 {
				t.Errorf("made %d requests, want only GET /user", len(f.seen()))
			}
		})
	}
}

func TestHub_SetStatus_PostsJSON(t *testing.T) {
	const link = "https://stackwright.example.com/team-a/preview-7"
	for _, tc := range []struct {
		name string
		st   Status
		want map[string]any
	}{{
		name: "pending",
		st:   Status{State: StatePending, Context: "stackwright/preview-7", Description: "Stackwright: preview of 6dcb09b5b578 pending", TargetURL: link},
		want: map[string]any{"state": "pending", "context": "stackwright/preview-7", "description": "Stackwright: preview of 6dcb09b5b578 pending", "target_url": link},
	}, {
		name: "success without a link",
		st:   Status{State: StateSuccess, Context: "stackwright/preview-7", Description: "Stackwright: preview succeeded: 1 to create"},
		want: map[string]any{"state": "success", "context": "stackwright/preview-7", "description": "Stackwright: preview succeeded: 1 to create", "target_url": ""},
	}, {
		name: "failure with a description cut to 140 bytes",
		st:   Status{State: StateFailure, Context: "stackwright/preview-7", Description: strings.Repeat("x", 200), TargetURL: link},
		want: map[string]any{"state": "failure", "context": "stackwright/preview-7", "description": strings.Repeat("x", 137) + "…", "target_url": link},
	}, {
		name: "description cut between characters",
		st:   Status{State: StateFailure, Context: "stackwright/preview-7", Description: strings.Repeat("é", 100), TargetURL: link},
		want: map[string]any{"state": "failure", "context": "stackwright/preview-7", "description": strings.Repeat("é", 68) + "…", "target_url": link},
	}} {
		for _, s := range hubSpecs {
			t.Run(string(s.kind)+"/"+tc.name, func(t *testing.T) {
				path := s.repoPath + "/statuses/" + shaA
				f := newFake(t, map[string]handler{"POST " + path: answer(http.StatusCreated, s.fixture(t, "status.json"))})
				if err := f.client(t, s).SetStatus(t.Context(), shaA, tc.st); err != nil {
					t.Fatalf("SetStatus: %v", err)
				}
				want := []call{{Method: http.MethodPost, Path: path, Body: tc.want}}
				if diff := cmp.Diff(want, f.seen(), equateEmpty); diff != "" {
					t.Errorf("requests (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestLab_SetStatus_PostsQuery(t *testing.T) {
	const link = "https://stackwright.example.com/team-a/preview-7"
	s := gitlabSpec
	for _, tc := range []struct {
		name string
		st   Status
		want url.Values
	}{{
		name: "pending is running",
		st:   Status{State: StatePending, Context: "stackwright/preview-7", Description: "Stackwright: preview of 6dcb09b5b578 pending", TargetURL: link},
		want: url.Values{"state": {"running"}, "name": {"stackwright/preview-7"}, "description": {"Stackwright: preview of 6dcb09b5b578 pending"}, "target_url": {link}},
	}, {
		name: "success without a link",
		st:   Status{State: StateSuccess, Context: "stackwright/preview-7", Description: "Stackwright: preview succeeded"},
		want: url.Values{"state": {"success"}, "name": {"stackwright/preview-7"}, "description": {"Stackwright: preview succeeded"}},
	}, {
		name: "failure is failed, its description cut",
		st:   Status{State: StateFailure, Context: "stackwright/preview-7", Description: strings.Repeat("é", 100), TargetURL: link},
		want: url.Values{"state": {"failed"}, "name": {"stackwright/preview-7"}, "description": {strings.Repeat("é", 68) + "…"}, "target_url": {link}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			path := s.repoPath + "/statuses/" + shaA
			f := newFake(t, map[string]handler{"POST " + path: answer(http.StatusCreated, s.fixture(t, "status.json"))})
			if err := f.client(t, s).SetStatus(t.Context(), shaA, tc.st); err != nil {
				t.Fatalf("SetStatus: %v", err)
			}
			want := []call{{Method: http.MethodPost, Path: path, Query: tc.want}}
			if diff := cmp.Diff(want, f.seen(), equateEmpty); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLab_SetStatus_AlreadyRunning(t *testing.T) {
	// GitLab keeps one running status per name and ref, and answers a second "running"
	// with a 400 of its state machine: the status is what was asked. Anything else it
	// refuses is an error.
	s := gitlabSpec
	for _, tc := range []struct {
		name  string
		state State
		body  []byte
		ok    bool
	}{
		{name: "running again", state: StatePending, body: s.fixture(t, "error-400-transition.json"), ok: true},
		{name: "another refusal", state: StatePending, body: []byte(`{"message":{"state":["does not have a valid value"]}}`)},
		{name: "a refused success", state: StateSuccess, body: []byte(`{"message":"Cannot transition status via :success from :success (Reason(s): Status cannot transition via \"success\")"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := s.repoPath + "/statuses/" + shaA
			f := newFake(t, map[string]handler{"POST " + path: answer(http.StatusBadRequest, tc.body)})
			err := f.client(t, s).SetStatus(t.Context(), shaA, Status{State: tc.state, Context: "stackwright/preview-7", Description: "Stackwright: update of 6dcb09b5b578 pending"})
			var e *APIError
			if tc.ok && err != nil {
				t.Errorf("SetStatus: %v", err)
			}
			if !tc.ok && (!errors.As(err, &e) || e.Status != http.StatusBadRequest || Retryable(err)) {
				t.Errorf("SetStatus: %v, want a 400 that is not retryable", err)
			}
		})
	}
}

func TestClient_SetStatus_RefusesWhatIsNotASHA(t *testing.T) {
	for _, s := range allSpecs {
		for _, sha := range []string{"", "main", "refs/heads/main", strings.ToUpper(shaA), shaA[:12], "../../user" + shaA[10:]} {
			t.Run(string(s.kind)+"/"+sha, func(t *testing.T) {
				f := newFake(t, nil)
				if err := f.client(t, s).SetStatus(t.Context(), sha, Status{State: StateSuccess, Context: "c"}); err == nil {
					t.Errorf("SetStatus(%q) succeeded", sha)
				}
				if n := len(f.seen()); n != 0 {
					t.Errorf("made %d requests", n)
				}
			})
		}
	}
}

func TestNew_Auth_HeadersPerForge(t *testing.T) {
	for _, tc := range []struct {
		s    spec
		want map[string]string // "" is absent
	}{
		{s: giteaSpec, want: map[string]string{"Authorization": "token " + testToken, "Private-Token": ""}},
		{s: githubSpec, want: map[string]string{
			"Authorization": "Bearer " + testToken, "Accept": "application/vnd.github+json", "X-Github-Api-Version": "2022-11-28", "Private-Token": "",
		}},
		{s: gitlabSpec, want: map[string]string{"Private-Token": testToken, "Authorization": ""}},
	} {
		t.Run(string(tc.s.kind), func(t *testing.T) {
			routes := commentRoutes(t, tc.s, 7)
			routes["GET "+tc.s.comments(7)] = answer(http.StatusOK, []byte("[]"))
			routes["GET "+tc.s.pulls()] = answer(http.StatusOK, []byte("[]"))
			routes["POST "+tc.s.repoPath+"/statuses/"+shaA] = answer(http.StatusCreated, tc.s.fixture(t, "status.json"))
			f := newFake(t, routes)
			c := f.client(t, tc.s)
			if _, err := c.PullRequests(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := c.UpsertComment(t.Context(), 7, marker("preview-9"), marker("preview-9")); err != nil {
				t.Fatal(err)
			}
			if err := c.SetStatus(t.Context(), shaA, Status{State: StateSuccess, Context: "c"}); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			for i, h := range f.headers {
				got := map[string]string{}
				for k := range tc.want {
					got[k] = h.Get(k)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s %s: headers (-want +got):\n%s", f.calls[i].Method, f.calls[i].Path, diff)
				}
				if ct := h.Get("Content-Type"); (f.calls[i].Body != nil) != (ct == "application/json") {
					t.Errorf("%s %s: Content-Type %q", f.calls[i].Method, f.calls[i].Path, ct)
				}
			}
			if len(f.headers) != 5 {
				t.Errorf("%d requests, want 5", len(f.headers))
			}
		})
	}
}

func TestNew_Options_RefusesBadOnes(t *testing.T) {
	for _, o := range []Options{
		{Kind: GitHub, API: "", Repository: "a/b"},
		{Kind: GitHub, API: "api.github.com", Repository: "a/b"},
		{Kind: GitHub, API: "ftp://api.github.com", Repository: "a/b"},
		{Kind: GitHub, API: "https://", Repository: "a/b"},
		{Kind: GitHub, API: "https://api.github.com", Repository: "a"},
		{Kind: GitHub, API: "https://api.github.com", Repository: "/b"},
		{Kind: GitLab, API: "https://gitlab.com/api/v4", Repository: "group/"},
		{Kind: "Bitbucket", API: "https://api.bitbucket.org/2.0", Repository: "a/b"},
	} {
		o.Token = testToken
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		} else if strings.Contains(err.Error(), testToken) {
			t.Errorf("New: %v shows the token", err)
		}
	}
}

func TestAPIError_Retryable_StatusesAndRateLimits(t *testing.T) {
	epoch := func(d time.Duration) string { return strconv.FormatInt(time.Now().Add(d).Unix(), 10) }
	for _, tc := range []struct {
		name   string
		s      spec
		status int
		header http.Header
		// body is a fixture's name, or the body itself.
		body      string
		message   string
		retryable bool
		// after is the RetryAfter wanted: exactly, or within a few seconds below it when
		// it comes from a reset time.
		after time.Duration
		reset bool
	}{
		{name: "401 bad credentials", s: githubSpec, status: 401, body: "error-401.json", message: "Bad credentials"},
		{name: "401 token required", s: giteaSpec, status: 401, body: "error-401.json", message: "token is required"},
		{name: "401 unauthorized", s: gitlabSpec, status: 401, body: "error-401.json", message: "401 Unauthorized"},
		{
			name: "403 with rate limit to spare", s: githubSpec, status: 403, body: "error-403.json", message: "Resource not accessible",
			header: header("x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4999", "x-ratelimit-reset", epoch(time.Hour)),
		},
		{name: "404", s: githubSpec, status: 404, body: "error-404.json", message: "Not Found"},
		{name: "404", s: giteaSpec, status: 404, body: "error-404.json", message: "The target couldn't be found."},
		{name: "404", s: gitlabSpec, status: 404, body: "error-404.json", message: "404 Project Not Found"},
		{name: "422", s: githubSpec, status: 422, body: "error-422.json", message: "Validation Failed"},
		{
			name: "403 primary rate limit spent", s: githubSpec, status: 403, body: "error-403-rate-limit.json", message: "API rate limit exceeded",
			header:    header("x-ratelimit-limit", "5000", "x-ratelimit-remaining", "0", "x-ratelimit-used", "5000", "x-ratelimit-reset", epoch(2*time.Minute), "x-ratelimit-resource", "core"),
			retryable: true, after: 2 * time.Minute, reset: true,
		},
		{
			name: "403 spent limit whose reset has passed", s: githubSpec, status: 403, body: "error-403-rate-limit.json", message: "API rate limit exceeded",
			header:    header("x-ratelimit-remaining", "0", "x-ratelimit-reset", epoch(-10*time.Second)),
			retryable: true, after: time.Second,
		},
		{
			name: "403 secondary rate limit", s: githubSpec, status: 403, body: "error-429-secondary.json", message: "secondary rate limit",
			header: header("retry-after", "30"), retryable: true, after: 30 * time.Second,
		},
		{
			name: "429 secondary rate limit", s: githubSpec, status: 429, body: "error-429-secondary.json", message: "secondary rate limit",
			header: header("retry-after", "60", "x-ratelimit-remaining", "4000"), retryable: true, after: time.Minute,
		},
		{
			name: "429 with Retry-After", s: gitlabSpec, status: 429, body: "error-429.txt", message: "Retry later",
			header: header("Content-Type", "text/plain", "Retry-After", "30", "RateLimit-Name", "throttle_authenticated_api", "RateLimit-Limit", "60",
				"RateLimit-Observed", "67", "RateLimit-Remaining", "0", "RateLimit-Reset", epoch(45*time.Second)),
			retryable: true, after: 30 * time.Second,
		},
		{
			name: "429 with RateLimit-Reset only", s: gitlabSpec, status: 429, body: "error-429.txt", message: "Retry later",
			header:    header("Content-Type", "text/plain", "RateLimit-Limit", "60", "RateLimit-Remaining", "0", "RateLimit-Reset", epoch(45*time.Second)),
			retryable: true, after: 45 * time.Second, reset: true,
		},
		{name: "429 saying nothing more", s: giteaSpec, status: 429, body: "", retryable: true},
		// What a forge asks is bounded (an hour: GitHub's limits reset within it).
		{name: "429 with a Retry-After of centuries", s: githubSpec, status: 429, body: "error-429-secondary.json", message: "secondary rate limit",
			header: header("Retry-After", "99999999999"), retryable: true, after: maxRetryAfter},
		{name: "403 with a reset in the year 3000", s: githubSpec, status: 403, body: "error-403-rate-limit.json", message: "API rate limit exceeded",
			header: header("x-ratelimit-remaining", "0", "x-ratelimit-reset", "32503680000"), retryable: true, after: maxRetryAfter},
		{name: "429 with a Retry-After date", s: githubSpec, status: 429, body: "", header: header("Retry-After", "Wed, 21 Oct 2026 07:28:00 GMT"), retryable: true},
		{name: "500", s: giteaSpec, status: 500, body: "error-500.json", message: "gitea.example.com/api/swagger", retryable: true},
		{name: "502 from a proxy", s: gitlabSpec, status: 502, body: "<html><body><h1>502 Bad Gateway</h1></body></html>", message: "502 Bad Gateway", retryable: true},
		{name: "503", s: githubSpec, status: 503, body: "", retryable: true},
	} {
		t.Run(string(tc.s.kind)+"/"+tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			if strings.HasPrefix(tc.body, "error-") {
				body = tc.s.fixture(t, tc.body)
			}
			f := newFake(t, map[string]handler{"GET " + tc.s.pulls(): func(*http.Request) reply {
				return reply{status: tc.status, header: tc.header, body: body}
			}})
			_, err := f.client(t, tc.s).PullRequests(t.Context())
			var e *APIError
			if !errors.As(err, &e) {
				t.Fatalf("PullRequests: %v, want an APIError", err)
			}
			path := strings.TrimPrefix(tc.s.pulls(), tc.s.prefix)
			if e.Method != http.MethodGet || e.Path != path || e.Status != tc.status || !strings.Contains(e.Message, tc.message) {
				t.Errorf("error %q, want GET %s: %d with %q", err, path, tc.status, tc.message)
			}
			if strings.Contains(err.Error(), "?") {
				t.Errorf("error %q names the query", err)
			}
			if got := Retryable(err); got != tc.retryable {
				t.Errorf("Retryable: %t, want %t", got, tc.retryable)
			}
			got := RetryAfter(err)
			if tc.reset {
				if got > tc.after || got < tc.after-5*time.Second {
					t.Errorf("RetryAfter: %v, want about %v", got, tc.after)
				}
			} else if got != tc.after {
				t.Errorf("RetryAfter: %v, want %v", got, tc.after)
			}
		})
	}
}

func TestClient_Errors_NetworkIsRetryable(t *testing.T) {
	for _, s := range allSpecs {
		t.Run(string(s.kind), func(t *testing.T) {
			f := newFake(t, nil)
			c := f.client(t, s)
			f.srv.Close()
			_, err := c.PullRequests(t.Context())
			var e *APIError
			if err == nil || errors.As(err, &e) || !Retryable(err) || RetryAfter(err) != 0 {
				t.Errorf("PullRequests: %v, want a retryable error that is no APIError", err)
			}
			if strings.Contains(err.Error(), f.srv.URL) {
				t.Errorf("error %q names the URL", err)
			}
		})
	}
}

func TestClient_Redirect_NotFollowed(t *testing.T) {
	for _, s := range allSpecs {
		for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
			t.Run(fmt.Sprintf("%s/%d", s.kind, code), func(t *testing.T) {
				var mu sync.Mutex
				var elsewhere []string
				other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					defer mu.Unlock()
					elsewhere = append(elsewhere, r.Header.Get("Authorization")+r.Header.Get("Private-Token"))
					_, _ = w.Write([]byte("[]"))
				}))
				defer other.Close()
				moved := func(r *http.Request) reply {
					var body []byte
					if s.kind == GitHub {
						body = s.fixture(t, "error-301-moved.json")
					}
					return reply{status: code, header: header("Location", other.URL+r.URL.RequestURI()), body: body}
				}
				f := newFake(t, map[string]handler{
					"GET " + s.pulls():                         moved,
					"POST " + s.repoPath + "/statuses/" + shaA: moved,
				})
				// The caller's client follows redirects; the forge's must not.
				hc := &http.Client{}
				c, err := New(Options{Kind: s.kind, API: f.srv.URL + s.prefix, Repository: s.repo, Token: testToken, HTTP: hc})
				if err != nil {
					t.Fatal(err)
				}
				_, err = c.PullRequests(t.Context())
				errs := []error{err, c.SetStatus(t.Context(), shaA, Status{State: StateSuccess, Context: "c"})}
				for _, err := range errs {
					var e *APIError
					if !errors.As(err, &e) || e.Status != code || Retryable(err) {
						t.Errorf("error %v, want a %d that is not retryable", err, code)
					}
					if err != nil && strings.Contains(err.Error(), testToken) {
						t.Errorf("error %q shows the token", err)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if len(elsewhere) != 0 {
					t.Errorf("the redirect was followed: %d requests elsewhere", len(elsewhere))
				}
				if hc.CheckRedirect != nil {
					t.Errorf("the caller's http.Client was changed")
				}
			})
		}
	}
}

func TestClient_Response_SizeCap(t *testing.T) {
	// A JSON array of exactly n bytes.
	array := func(n int) []byte { return []byte("[" + strings.Repeat(" ", n-2) + "]") }
	for _, s := range allSpecs {
		t.Run(string(s.kind), func(t *testing.T) {
			for _, tc := range []struct {
				name   string
				status int
				body   []byte
				err    string
			}{
				{name: "at the cap", status: http.StatusOK, body: array(maxResponseBytes)},
				{name: "over the cap", status: http.StatusOK, body: array(maxResponseBytes + 1), err: "answer larger than 4194304 bytes"},
				{name: "a refusal over the cap", status: http.StatusForbidden, body: array(2 * maxResponseBytes), err: ": 403 ["},
			} {
				t.Run(tc.name, func(t *testing.T) {
					f := newFake(t, map[string]handler{"GET " + s.pulls(): answer(tc.status, tc.body)})
					got, err := f.client(t, s).PullRequests(t.Context())
					switch {
					case tc.err == "" && (err != nil || len(got) != 0):
						t.Errorf("PullRequests: %v, %v; want nothing", got, err)
					case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
						t.Errorf("PullRequests: %v, want %q", err, tc.err)
					case err != nil && len(err.Error()) > 500:
						t.Errorf("error of %d bytes", len(err.Error()))
					}
				})
			}
		})
	}
}

func TestClient_Errors_NeverShowTheToken(t *testing.T) {
	for _, s := range allSpecs {
		for _, tc := range []struct {
			name string
			h    handler
		}{
			{name: "a refusal", h: func(*http.Request) reply { return reply{status: 401, body: s.fixture(t, "error-401.json")} }},
			// A proxy (or a forge) that echoes the request in its answer.
			{name: "a refusal echoing the request's headers", h: func(r *http.Request) reply {
				b, _ := json.Marshal(map[string]any{"message": "401 Unauthorized", "request": map[string]any{"headers": r.Header}})
				return reply{status: 401, body: b}
			}},
			{name: "a failure echoing the token where the message is cut", h: func(r *http.Request) reply {
				return reply{status: 502, body: []byte(strings.Repeat("x", 190) + " " + testToken)}
			}},
			{name: "a redirect", h: func(*http.Request) reply {
				return reply{status: 302, header: header("Location", "https://elsewhere.example.com/?token="+testToken)}
			}},
			{name: "an answer that is not JSON", h: func(*http.Request) reply { return reply{status: 200, body: []byte(testToken)} }},
			{name: "an answer of the wrong shape", h: func(*http.Request) reply { return reply{status: 200, body: []byte(`{"token":"` + testToken + `"}`)} }},
			{name: "an answer too large", h: func(*http.Request) reply {
				return reply{status: 200, body: []byte(`["` + testToken + strings.Repeat(" ", maxResponseBytes) + `"]`)}
			}},
		} {
			t.Run(string(s.kind)+"/"+tc.name, func(t *testing.T) {
				f := newFake(t, map[string]handler{"GET " + s.pulls(): tc.h})
				_, err := f.client(t, s).PullRequests(t.Context())
				if err == nil {
					t.Fatal("PullRequests succeeded")
				}
				// Not even its start, where an excerpt cuts it.
				if strings.Contains(err.Error(), testToken[:8]) {
					t.Errorf("error %q shows the token", err)
				}
			})
		}
		t.Run(string(s.kind)+"/a token net/http refuses", func(t *testing.T) {
			const bad = "swtok_line\nbreak"
			f := newFake(t, nil)
			c, err := New(Options{Kind: s.kind, API: f.srv.URL + s.prefix, Repository: s.repo, Token: bad, HTTP: f.srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.PullRequests(t.Context())
			if err == nil || strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "swtok_line") {
				t.Errorf("PullRequests: %v", err)
			}
		})
	}
}
