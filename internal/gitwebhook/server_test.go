package gitwebhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/budget"
	"github.com/stackwright/stackwright/internal/scheme"
	"github.com/stackwright/stackwright/internal/source/git"
)

const (
	testNS    = "team-a"
	testToken = "s3cret-token"
	infraURL  = "https://github.com/acme/infra.git"
)

func stack(ns, name, repo, branch, commit string) *pulumiv1.Stack {
	s := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	s.Spec.Stack = "dev"
	s.Spec.ProjectRepo, s.Spec.Branch, s.Spec.Commit = repo, branch, commit
	return s
}

func webhookSecret(ns string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: SecretName}, Data: data}
}

// fixtures is a namespace with Stacks of every kind a push must tell apart, a neighbour
// with a Stack on the same repository, and namespaces without a usable token.
func fixtures() []client.Object {
	deleting := stack(testNS, "deleting", infraURL, "main", "")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{"stackwright.dev/finalizer"}
	return []client.Object{
		webhookSecret(testNS, map[string][]byte{SecretKey: []byte(testToken)}),
		webhookSecret("team-b", map[string][]byte{SecretKey: []byte(testToken)}),
		webhookSecret("no-key", map[string][]byte{"other": []byte(testToken)}),
		stack(testNS, "https-main", infraURL, "main", ""),
		stack(testNS, "ssh-main", "git@github.com:acme/infra", "refs/heads/main", ""),
		stack(testNS, "default-branch", "https://github.com/Acme/infra/", "", ""),
		stack(testNS, "dev", infraURL, "dev", ""),
		stack(testNS, "pinned", infraURL, "", "0123456789abcdef0123456789abcdef01234567"),
		stack(testNS, "other-repo", "https://github.com/acme/other.git", "main", ""),
		stack(testNS, "gitlab", "https://gitlab.example.com/grp/app.git", "main", ""),
		stack(testNS, "no-git", "", "", ""),
		deleting,
		stack("team-b", "neighbour", infraURL, "main", ""),
		stack("no-secret", "lonely", infraURL, "main", ""),
	}
}

// The manager wires the git cache's Poke as it is.
var _ = Server{Poke: (&git.Cache{}).Poke}

// recorder stands in for the git cache and the Stack controller's queue.
type recorder struct {
	mu       sync.Mutex
	poked    []string
	enqueued []string
}

func (r *recorder) poke(repoURL string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.poked = append(r.poked, git.RepoKey(repoURL))
	return 1
}

func (r *recorder) enqueue(k types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.enqueued = append(r.enqueued, k.String())
}

// sorted returns what was poked (as repository keys) and enqueued, in a stable order.
func (r *recorder) sorted() (poked, enqueued []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.poked)), slices.Sorted(slices.Values(r.enqueued))
}

// countingReader tells whether the handler read the API.
type countingReader struct {
	client.Reader
	mu    sync.Mutex
	reads int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Reader.Get(ctx, key, obj, opts...)
}

func newServer(t *testing.T) (*Server, *recorder, *countingReader) {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(fixtures()...).Build()
	rec, secrets := &recorder{}, &countingReader{Reader: c}
	return &Server{Stacks: c, Secrets: secrets, Poke: rec.poke, Enqueue: rec.enqueue}, rec, secrets
}

func sign(body string) string {
	mac := hmac.New(sha256.New, []byte(testToken))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func githubHeaders(event, body string) map[string]string {
	return map[string]string{"X-GitHub-Event": event, "X-Hub-Signature-256": sign(body), "Content-Type": "application/json"}
}

func gitlabHeaders(event, token string) map[string]string {
	return map[string]string{"X-Gitlab-Event": event, "X-Gitlab-Token": token, "Content-Type": "application/json"}
}

func genericHeaders(body string) map[string]string {
	return map[string]string{"X-Signature": sign(body)}
}

const (
	// githubPush names the repository by its HTTPS clone URL only, so that the SSH Stack
	// matches through the repository key.
	githubPush    = `{"ref":"refs/heads/main","repository":{"clone_url":"https://github.com/acme/infra.git"}}`
	githubFull    = `{"ref":"refs/heads/main","repository":{"clone_url":"https://github.com/acme/infra.git","ssh_url":"git@github.com:acme/infra.git","git_url":"git://github.com/acme/infra.git","html_url":"https://github.com/acme/infra","url":"https://github.com/acme/infra"}}`
	githubTag     = `{"ref":"refs/tags/v1.0.0","repository":{"clone_url":"https://github.com/acme/infra.git"}}`
	githubDeleted = `{"ref":"refs/heads/main","deleted":true,"repository":{"clone_url":"https://github.com/acme/infra.git"}}`
	gitlabPush    = `{"ref":"refs/heads/main","after":"5f1c0ffee","project":{"git_ssh_url":"git@gitlab.example.com:grp/app.git","web_url":"https://gitlab.example.com/grp/app"},"repository":{"homepage":"https://gitlab.example.com/grp/app"}}`
	gitlabDeleted = `{"ref":"refs/heads/main","after":"0000000000000000000000000000000000000000","project":{"git_ssh_url":"git@gitlab.example.com:grp/app.git"}}`
)

var (
	infraMainStacks = []string{"team-a/default-branch", "team-a/https-main", "team-a/ssh-main"}
	noStacks        = `{"stacks":0}` + "\n"
	unauthorizedRes = unauthorizedBody + "\n"
)

func TestServer_ServeHTTP_Notifications(t *testing.T) {
	githubForm := "payload=" + url.QueryEscape(githubFull)
	tests := []struct {
		name         string
		method       string
		namespace    string
		headers      map[string]string
		body         string
		wantStatus   int
		wantBody     string
		wantPoked    []string
		wantEnqueued []string
	}{
		{
			name: "githubPushEnqueuesStacksTrackingTheBranchWhateverTheirURLForm", headers: githubHeaders("push", githubPush), body: githubPush,
			wantStatus: http.StatusAccepted, wantBody: `{"stacks":3}` + "\n",
			wantPoked: []string{"github.com/acme/infra"}, wantEnqueued: infraMainStacks,
		},
		{
			name:    "githubFormEncodedPushReadsItsPayloadField",
			headers: map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": sign(githubForm), "Content-Type": "application/x-www-form-urlencoded"}, body: githubForm,
			wantStatus: http.StatusAccepted, wantBody: `{"stacks":3}` + "\n",
			wantPoked: []string{"github.com/acme/infra"}, wantEnqueued: infraMainStacks,
		},
		{
			name: "githubWrongSignatureIsRefused", body: githubPush,
			headers:    map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + strings.Repeat("ab", 32)},
			wantStatus: http.StatusUnauthorized, wantBody: unauthorizedRes,
		},
		{
			name: "githubSignatureWithOtherBodyIsRefused", headers: githubHeaders("push", githubTag), body: githubPush,
			wantStatus: http.StatusUnauthorized, wantBody: unauthorizedRes,
		},
		{
			name: "githubMissingSignatureIsRefused", headers: map[string]string{"X-GitHub-Event": "push"}, body: githubPush,
			wantStatus: http.StatusUnauthorized, wantBody: unauthorizedRes,
		},
		{
			name: "missingSecretLooksLikeAWrongSignature", namespace: "no-secret", headers: githubHeaders("push", githubPush), body: githubPush,
			wantStatus: http.StatusUnauthorized, wantBody: unauthorizedRes,
		},
		{
			name: "secretWithoutTokenKeyLooksLikeAWrongSignature", namespace: "no-key", headers: githubHeaders("push", githubPush), body: githubPush,
			wantStatus: http.StatusUnauthorized, wantBody: unauthorizedRes,
		},
		{
			name: "githubPingAnswersOK", headers: githubHeaders("ping", `{"zen":"Keep it simple."}`), body: `{"zen":"Keep it simple."}`,
			wantStatus: http.StatusOK, wantBody: noStacks,
		},
		{
			name: "githubOtherEventIsIgnored", headers: githubHeaders("issues", `{}`), body: `{}`,
			wantStatus: http.StatusAccepted, wantBody: noStacks,
		},
		{
			name: "githubTagPushConcernsNoStack", headers: githubHeaders("push", githubTag), body: githubTag,
			wantStatus: http.StatusAccepted, wantBody: noStacks,
		},
		{
			name: "githubDeletedBranchConcernsNoStack", headers: githubHeaders("push", githubDeleted), body: githubDeleted,
			wantStatus: http.StatusAccepted, wantBody: noStacks,
		},
		{
			name: "githubMalformedJSONIsABadRequest", headers: githubHeaders("push", `{"ref":`), body: `{"ref":`,
			wantStatus: http.StatusBadRequest,
		},
		{
			name: "githubPushWithoutRepositoryIsABadRequest", headers: githubHeaders("push", `{"ref":"refs/heads/main"}`), body: `{"ref":"refs/heads/main"}`,
			wantStatus: http.StatusBadRequest,
		},
		{
			name: "gitlabPushWithRightTokenEnqueuesItsRepositorysStacks", headers: gitlabHeaders("Push Hook", testToken), body: gitlabPush,
			wantStatus: http.StatusAccepted, wantBody: `{"stacks":1}` + "\n",
			wantPoked: []string{"gitlab.example.com/grp/app"}, wantEnqueued: []string{"team-a/gitlab"},
		},
		{
			name: "gitlabWrongTokenIsRefused", headers: gitlabHeaders("Push Hook", testToken+"x"), body: gitlabPush,
			wantStatus: http.StatusUnauthorized, wantBody: unauthorizedRes,
		},
		{
			name: "gitlabTagPushHookIsIgnored", headers: gitlabHeaders("Tag Push Hook", testToken), body: `{"ref":"refs/tags/v1"}`,
			wantStatus: http.StatusAccepted, wantBody: noStacks,
		},
		{
			name: "gitlabDeletedBranchConcernsNoStack", headers: gitlabHeaders("Push Hook", testToken), body: gitlabDeleted,
			wantStatus: http.StatusAccepted, wantBody: noStacks,
		},
		{
			name: "genericEmptyBodyEnqueuesEveryBranchTrackingGitStack", headers: genericHeaders(""),
			wantStatus: http.StatusAccepted, wantBody: `{"stacks":6}` + "\n",
			wantPoked:    []string{"github.com/acme/infra", "github.com/acme/other", "gitlab.example.com/grp/app"},
			wantEnqueued: []string{"team-a/default-branch", "team-a/dev", "team-a/gitlab", "team-a/https-main", "team-a/other-repo", "team-a/ssh-main"},
		},
		{
			name: "genericRepositoryAndShortRefNarrowTheStacks", headers: genericHeaders(`{"repository":"ssh://git@github.com/acme/infra","ref":"dev"}`),
			body:       `{"repository":"ssh://git@github.com/acme/infra","ref":"dev"}`,
			wantStatus: http.StatusAccepted, wantBody: `{"stacks":2}` + "\n",
			wantPoked: []string{"github.com/acme/infra"}, wantEnqueued: []string{"team-a/default-branch", "team-a/dev"},
		},
		{
			name: "genericRefWithoutRepositoryMatchesEveryRepository", headers: genericHeaders(`{"ref":"refs/heads/dev"}`), body: `{"ref":"refs/heads/dev"}`,
			wantStatus: http.StatusAccepted, wantBody: `{"stacks":2}` + "\n",
			wantPoked: []string{"github.com/acme/infra"}, wantEnqueued: []string{"team-a/default-branch", "team-a/dev"},
		},
		{
			name: "genericTagRefConcernsNoStack", headers: genericHeaders(`{"ref":"refs/tags/v1"}`), body: `{"ref":"refs/tags/v1"}`,
			wantStatus: http.StatusAccepted, wantBody: noStacks,
		},
		{
			name: "genericRepositoryThatIsNoGitURLIsABadRequest", headers: genericHeaders(`{"repository":"not a url"}`), body: `{"repository":"not a url"}`,
			wantStatus: http.StatusBadRequest,
		},
		{
			name: "genericSha1SignatureIsRefused", headers: map[string]string{"X-Signature": "sha1=" + strings.Repeat("ab", 20)},
			wantStatus: http.StatusUnauthorized, wantBody: unauthorizedRes,
		},
		{
			name: "genericMalformedJSONIsABadRequest", headers: genericHeaders(`[`), body: `[`,
			wantStatus: http.StatusBadRequest,
		},
		{
			name: "oversizeBodyIsRefusedBeforeAuthentication", headers: map[string]string{"X-Signature": "sha256=00"}, body: strings.Repeat("x", maxBodyBytes+1),
			wantStatus: http.StatusRequestEntityTooLarge,
		},
		{
			name: "namespaceThatIsNoDNSLabelIsNotFound", namespace: "Team_A", headers: githubHeaders("push", githubPush), body: githubPush,
			wantStatus: http.StatusNotFound,
		},
		{
			name: "getIsNotAllowed", method: http.MethodGet,
			wantStatus: http.StatusMethodNotAllowed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, rec, _ := newServer(t)
			w := do(srv.Handler(), tt.method, tt.namespace, tt.headers, tt.body)
			if w.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %q", w.Code, tt.wantStatus, w.Body.String())
			}
			if tt.wantBody != "" {
				if diff := cmp.Diff(tt.wantBody, w.Body.String()); diff != "" {
					t.Errorf("body (-want +got):\n%s", diff)
				}
			}
			poked, enqueued := rec.sorted()
			if diff := cmp.Diff(tt.wantPoked, poked); diff != "" {
				t.Errorf("poked repositories (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantEnqueued, enqueued); diff != "" {
				t.Errorf("enqueued Stacks (-want +got):\n%s", diff)
			}
		})
	}
}

func do(h http.Handler, method, namespace string, headers map[string]string, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(orDefault(method, http.MethodPost), hookPath+orDefault(namespace, testNS), strings.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Only a request that carries a proof, under a valid path, costs an API read: the rest
// cannot make unauthenticated callers load the API server.
func TestServer_ServeHTTP_ReadsTheSecretOnlyForValidSignedRequests(t *testing.T) {
	tests := []struct {
		name      string
		namespace string
		headers   map[string]string
		body      string
		wantReads int
	}{
		{name: "invalidNamespace", namespace: "-bad-", headers: genericHeaders(""), wantReads: 0},
		{name: "noProof", headers: map[string]string{"X-GitHub-Event": "push"}, body: githubPush, wantReads: 0},
		{name: "oversizeBody", headers: genericHeaders(""), body: strings.Repeat("x", maxBodyBytes+1), wantReads: 0},
		{name: "noGitStacks", namespace: "no-git-stacks", headers: genericHeaders(""), wantReads: 0},
		{name: "signed", headers: genericHeaders(""), wantReads: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _, secrets := newServer(t)
			do(srv.Handler(), "", tt.namespace, tt.headers, tt.body)
			if diff := cmp.Diff(tt.wantReads, secrets.reads); diff != "" {
				t.Errorf("Secret reads (-want +got):\n%s", diff)
			}
		})
	}
}

// The series stay the fixed set of results whatever the requests name.
func TestServer_ServeHTTP_CountsByResultOnly(t *testing.T) {
	srv, _, _ := newServer(t)
	before := testutil.ToFloat64(requests.WithLabelValues(resultUnauthorized))
	for _, ns := range []string{testNS, "no-secret", "attacker-chosen-1", "attacker-chosen-2"} {
		do(srv.Handler(), "", ns, map[string]string{"X-GitHub-Event": "evil", "X-Hub-Signature-256": "sha256=00"}, "{}")
	}
	do(srv.Handler(), "", testNS, genericHeaders(""), "")
	if got := testutil.ToFloat64(requests.WithLabelValues(resultUnauthorized)) - before; got != 4 {
		t.Errorf("unauthorized requests counted = %v, want 4", got)
	}
	if n := testutil.CollectAndCount(requests); n != 8 {
		t.Errorf("series = %d, want the 8 results", n)
	}
}

// A flood of signed-looking requests at one namespace costs the API server a bounded
// number of Secret reads, the rest answered 429 without one, and does not throttle a
// signed push to another namespace.
func TestServer_ServeHTTP_FloodIsThrottledPerNamespace(t *testing.T) {
	srv, rec, secrets := newServer(t)
	h := srv.Handler()
	codes := map[int]int{}
	for range nsBurst + 20 {
		codes[do(h, "", testNS, map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=00"}, "{}").Code]++
	}
	if secrets.reads > nsBurst+1 {
		t.Errorf("Secret reads = %d, want at most the namespace's burst %d (and what the rate adds meanwhile)", secrets.reads, nsBurst)
	}
	if codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("answers = %v, want some 429", codes)
	}
	if w := do(h, "", "team-b", githubHeaders("push", githubPush), githubPush); w.Code != http.StatusAccepted {
		t.Errorf("the neighbour's signed push = %d %q, want 202", w.Code, w.Body.String())
	}
	if _, enqueued := rec.sorted(); !slices.Equal(enqueued, []string{"team-b/neighbour"}) {
		t.Errorf("enqueued = %v, want team-b/neighbour", enqueued)
	}
}

// countingBody counts what the handler read of a request body.
type countingBody struct {
	r    io.Reader
	read int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}

// Nothing is read of a body before its request shows a proof header, for a namespace
// whose Stacks follow a git repository; and what is read is bounded.
func TestServer_ServeHTTP_BodyReadOnlyAfterTheCheapChecks(t *testing.T) {
	large := strings.Repeat("x", 8<<20)
	tests := []struct {
		name       string
		namespace  string
		headers    map[string]string
		wantStatus int
		wantRead   int64
	}{
		{name: "noProof", namespace: testNS, headers: map[string]string{"X-GitHub-Event": "push"}, wantStatus: http.StatusUnauthorized},
		{name: "noGitStacks", namespace: "no-git-stacks", headers: map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=00"}, wantStatus: http.StatusUnauthorized},
		{name: "proofHeader", namespace: testNS, headers: map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=00"}, wantStatus: http.StatusRequestEntityTooLarge, wantRead: maxBodyBytes + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _, _ := newServer(t)
			body := &countingBody{r: strings.NewReader(large)}
			req := httptest.NewRequest(http.MethodPost, hookPath+tt.namespace, body)
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, req)
			if w.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d", w.Code, tt.wantStatus)
			}
			// MaxBytesReader reads in chunks: allow one buffer past the limit.
			if body.read < tt.wantRead || body.read > tt.wantRead+32<<10 {
				t.Errorf("read %d bytes of the body, want %d", body.read, tt.wantRead)
			}
		})
	}
}

// Connections beyond the cap wait for one to close.
func TestServer_Start_CapsConnections(t *testing.T) {
	srv, _, _ := newServer(t)
	srv.MaxConnections = 1
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = srv.Start(ctx) }()
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	post := func(timeout time.Duration) error {
		c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Post("http://"+ln.Addr().String()+hookPath+testNS, "application/json", strings.NewReader("{}"))
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	// The one connection served is the idle one (the server reads its headers for 10 s).
	time.Sleep(100 * time.Millisecond)
	if err := post(time.Second); err == nil {
		t.Error("a second connection was served while the cap was taken")
	}
	_ = idle.Close()
	if err := post(10 * time.Second); err != nil {
		t.Errorf("after the idle connection closed: %v", err)
	}
}

func TestServer_Start_ServesUntilContextEnds(t *testing.T) {
	srv, rec, _ := newServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	if !srv.NeedLeaderElection() {
		t.Error("NeedLeaderElection() = false, want true")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()

	body := `{"repository":"git@github.com:acme/other.git"}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+ln.Addr().String()+hookPath+testNS, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Signature", sign(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("failed to post notification: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || string(got) != `{"stacks":1}`+"\n" {
		t.Errorf("response = %d %q, want 202 with one Stack", resp.StatusCode, got)
	}
	if _, enqueued := rec.sorted(); !slices.Equal(enqueued, []string{"team-a/other-repo"}) {
		t.Errorf("enqueued = %v, want team-a/other-repo", enqueued)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start() = %v, want nil after the context ends", err)
		}
	case <-time.After(shutdownTimeout + 5*time.Second):
		t.Fatal("Start did not return after the context ended")
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("server still accepts connections after the context ended")
	}
}

func TestServer_Start_ReturnsListenError(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	srv, _, _ := newServer(t)
	srv.Addr = taken.Addr().String()
	var opErr *net.OpError
	if err := srv.Start(t.Context()); !errors.As(err, &opErr) {
		t.Errorf("Start() = %v, want the listen error", err)
	}
}

// A delivery that finds the manager's memory budget spent is answered 503, for the forge to
// deliver again, and holds nothing afterwards; one that fits is read and gives its bytes
// back once handled.
func TestServer_ServeHTTP_SpentMemoryBudgetAnswersRetryLater(t *testing.T) {
	tests := []struct {
		name     string
		free     int64
		wantCode int
	}{
		{name: "Spent", free: 8, wantCode: http.StatusServiceUnavailable},
		{name: "Fits", free: 1 << 20, wantCode: http.StatusAccepted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _, _ := newServer(t)
			const limit = 4 << 20
			srv.Memory = budget.New(limit)
			other := srv.Memory.Charge()
			if err := other.Take(limit - tt.free); err != nil {
				t.Fatal(err)
			}
			w := do(srv.Handler(), "", testNS, githubHeaders("push", githubPush), githubPush)
			if w.Code != tt.wantCode {
				t.Errorf("status = %d (%s); want %d", w.Code, w.Body.String(), tt.wantCode)
			}
			if tt.wantCode == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
				t.Error("no Retry-After on 503")
			}
			if got := srv.Memory.InUse(); got != limit-tt.free {
				t.Errorf("in use after the request = %d; want only the other holder's %d", got, limit-tt.free)
			}
		})
	}
}

func TestServer_ServeHTTP_PullRequestEventsPokeTheirSets(t *testing.T) {
	const ns = "previews"
	set := func(name, repo string) *v1alpha1.StackSet {
		s := &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		s.Spec.Generator.PullRequests = &v1alpha1.PullRequestsGenerator{Forge: "Gitea", Repository: repo}
		return s
	}
	branches := &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "branches"}}
	branches.Spec.Generator.GitBranches = &v1alpha1.GitBranchesGenerator{GitRepository: v1alpha1.GitRepository{URL: infraURL}}
	githubPR := `{"action":"synchronize","number":7,"repository":{"full_name":"Acme/Infra"}}`
	gitlabMR := `{"object_kind":"merge_request","project":{"path_with_namespace":"acme/infra"}}`
	tests := []struct {
		name         string
		headers      map[string]string
		body         string
		unwired      bool
		wantStatus   int
		wantSetPokes []string
		wantEnqueued []string
	}{
		{
			name: "githubOrGiteaPullRequestEnqueuesTheSetsOfItsRepository", headers: githubHeaders("pull_request", githubPR), body: githubPR,
			wantStatus: http.StatusAccepted, wantSetPokes: []string{ns + "/Acme/Infra"}, wantEnqueued: []string{ns + "/infra-prs", ns + "/infra-prs-2"},
		},
		{
			name: "gitlabMergeRequestEnqueuesTheSetsOfItsProject", headers: gitlabHeaders("Merge Request Hook", testToken), body: gitlabMR,
			wantStatus: http.StatusAccepted, wantSetPokes: []string{ns + "/acme/infra"}, wantEnqueued: []string{ns + "/infra-prs", ns + "/infra-prs-2"},
		},
		{
			name: "pullRequestWithoutRepositoryIsABadRequest", headers: githubHeaders("pull_request", `{}`), body: `{}`,
			wantStatus: http.StatusBadRequest,
		},
		{
			name: "withoutPullRequestWiringANamespaceOfSetsOnlyIsRefused", headers: githubHeaders("pull_request", githubPR), body: githubPR, unwired: true,
			wantStatus: http.StatusUnauthorized,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := scheme.New()
			if err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(
				webhookSecret(ns, map[string][]byte{SecretKey: []byte(testToken)}),
				set("infra-prs", "acme/infra"), set("infra-prs-2", "ACME/infra"), set("other-prs", "acme/other"), branches,
			).Build()
			var pokes, enqueued []string
			srv := &Server{Stacks: c, Secrets: c, Poke: func(string) int { return 0 }, Enqueue: func(types.NamespacedName) {}}
			if !tt.unwired {
				srv.PokeSet = func(namespace, repo string) { pokes = append(pokes, namespace+"/"+repo) }
				srv.EnqueueSet = func(k types.NamespacedName) { enqueued = append(enqueued, k.String()) }
			}
			w := do(srv.Handler(), "", ns, tt.headers, tt.body)
			if w.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %q", w.Code, tt.wantStatus, w.Body.String())
			}
			slices.Sort(enqueued)
			if diff := cmp.Diff(tt.wantSetPokes, pokes); diff != "" {
				t.Errorf("poked sets (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantEnqueued, enqueued); diff != "" {
				t.Errorf("enqueued sets (-want +got):\n%s", diff)
			}
		})
	}
}
