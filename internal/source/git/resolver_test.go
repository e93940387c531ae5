package git

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/source"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

const (
	testUser     = "deployer"
	testPassword = "s3cret-Passw0rd"
	testToken    = "ghp_token0123456789"
)

var projectFiles1 = map[string]string{
	"infra/app/Pulumi.yaml": "name: app\nruntime: yaml\n",
	"infra/app/main.txt":    "v1",
	"shared/lib.txt":        "shared v1",
	"README.md":             "readme",
}

// httpRepo is a repository served over smart HTTP with basic auth, and a Secret holding
// the credentials it accepts.
type httpRepo struct {
	repo   *gitserver.Repo
	server *gitserver.HTTPServer
	url    string
	first  string
	// secret holds the credentials the server accepts, for basicAuth(secretName).
	secret client.Object
}

const secretName = "git-creds"

func newHTTPRepo(t *testing.T) *httpRepo {
	t.Helper()
	root := t.TempDir()
	r, first := gitserver.NewRepo(t, root, "infra", projectFiles1)
	s := gitserver.NewHTTPServer(t, root, map[string]string{testUser: testPassword, tokenUsername: testToken})
	return &httpRepo{
		repo: r, server: s, url: s.URL + "/infra.git", first: first,
		secret: secret(secretName, map[string]string{"username": testUser, "password": testPassword}),
	}
}

func (h *httpRepo) branchStack(name, branch string) *pulumiv1.Stack {
	return newStack(name, pulumiv1.GitSource{ProjectRepo: h.url, Branch: branch, RepoDir: "infra/app", GitAuth: basicAuth(secretName)})
}

// The head of a branch becomes an artifact of the whole tree (siblings of repoDir
// included), with the commit SHA as revision and repoDir as Dir.
func TestResolver_Resolve_BranchHeadToArtifact(t *testing.T) {
	h := newHTTPRepo(t)
	f := newFixture(t, h.secret)

	a := f.resolve(t, h.branchStack("app", "main"))

	if a.Revision != h.first || a.Dir != "infra/app" {
		t.Errorf("Resolve() = %+v, want revision %s and dir infra/app", a, h.first)
	}
	if diff := cmp.Diff(projectFiles1, f.extract(t, a)); diff != "" {
		t.Errorf("artifact files (-want +got):\n%s", diff)
	}
	if got, want := h.server.Counts(), [2]int64{1, 1}; got != want {
		t.Errorf("server saw %d listings and %d fetches, want %v: the fetch should reuse the listing's session", got[0], got[1], want)
	}
}

// A pushed commit is seen once the listing is older than the Stack's interval, and costs
// exactly one listing and one fetch; an unchanged head costs one listing and no fetch;
// within the interval nothing reaches the server.
func TestResolver_Resolve_BranchPollingPerInterval(t *testing.T) {
	h := newHTTPRepo(t)
	f := newFixture(t, h.secret)
	stack := h.branchStack("app", "main")
	first := f.resolve(t, stack)

	second := h.repo.Commit(map[string]string{"infra/app/main.txt": "v2"})
	f.clock.Advance(Interval(stack) - time.Second)
	if a := f.resolve(t, stack); a != first {
		t.Errorf("within the interval Resolve() = %+v, want the memoised %+v", a, first)
	}
	if got, want := h.server.Counts(), [2]int64{1, 1}; got != want {
		t.Errorf("within the interval: %v requests, want %v", got, want)
	}

	f.clock.Advance(time.Second)
	a := f.resolve(t, stack)
	if a.Revision != second || a.Digest == first.Digest {
		t.Errorf("after the interval Resolve() = %+v, want revision %s with a new digest", a, second)
	}
	if got := f.extract(t, a)["infra/app/main.txt"]; got != "v2" {
		t.Errorf("main.txt = %q, want v2", got)
	}
	if got, want := h.server.Counts(), [2]int64{2, 2}; got != want {
		t.Errorf("new commit: %v requests, want %v (one listing, one fetch)", got, want)
	}

	f.clock.Advance(Interval(stack))
	if again := f.resolve(t, stack); again != a {
		t.Errorf("unchanged head: Resolve() = %+v, want %+v", again, a)
	}
	if got, want := h.server.Counts(), [2]int64{3, 2}; got != want {
		t.Errorf("unchanged head: %v requests, want %v (a listing, no fetch)", got, want)
	}
}

// A pinned commit stays put when its branch advances, and costs no network once fetched.
func TestResolver_Resolve_PinnedCommitDoesNotMove(t *testing.T) {
	h := newHTTPRepo(t)
	f := newFixture(t, h.secret)
	pinned := newStack("pinned", pulumiv1.GitSource{ProjectRepo: h.url, Commit: h.first, RepoDir: "infra/app", GitAuth: basicAuth(secretName)})
	tracking := h.branchStack("tracking", "main")
	before := f.resolve(t, pinned)

	second := h.repo.Commit(map[string]string{"infra/app/main.txt": "v2"})
	f.clock.Advance(time.Hour)
	if a := f.resolve(t, tracking); a.Revision != second {
		t.Fatalf("tracking Stack revision = %s, want %s", a.Revision, second)
	}
	counts := h.server.Counts()
	after := f.resolve(t, pinned)

	if after != before || after.Revision != h.first {
		t.Errorf("pinned Resolve() = %+v, want %+v at %s", after, before, h.first)
	}
	if got := h.server.Counts(); got != counts {
		t.Errorf("pinned commit already cached: server saw %v requests, had %v", got, counts)
	}
}

// "main" and "refs/heads/main" are one branch, and share one listing.
func TestResolver_Resolve_FullBranchRefIsShortName(t *testing.T) {
	h := newHTTPRepo(t)
	f := newFixture(t, h.secret)

	short := f.resolve(t, h.branchStack("short", "main"))
	full := f.resolve(t, h.branchStack("full", "refs/heads/main"))

	if full != short {
		t.Errorf("refs/heads/main resolved to %+v, main to %+v", full, short)
	}
	if got, want := h.server.Counts(), [2]int64{1, 1}; got != want {
		t.Errorf("server saw %v requests, want %v", got, want)
	}
}

// A full ref other than a branch is taken as written, as the Automation API does; an
// annotated tag resolves to the commit it tags.
func TestResolver_Resolve_AnnotatedTagRef(t *testing.T) {
	h := newHTTPRepo(t)
	h.repo.Tag("v1")
	h.repo.Commit(map[string]string{"infra/app/main.txt": "v2"})
	f := newFixture(t, h.secret)

	a := f.resolve(t, h.branchStack("app", "refs/tags/v1"))

	if a.Revision != h.first {
		t.Errorf("Revision = %s, want the tagged commit %s", a.Revision, h.first)
	}
	if got := f.extract(t, a)["infra/app/main.txt"]; got != "v1" {
		t.Errorf("main.txt = %q, want v1", got)
	}
}

// A corrected Secret takes effect at once: other credentials are another cache entry, so
// the failed listing remembered for the old ones does not hold the Stack back.
func TestResolver_Resolve_CorrectedSecretTakesEffectAtOnce(t *testing.T) {
	h := newHTTPRepo(t)
	f := newFixture(t, secret(secretName, map[string]string{"username": testUser, "password": "typo"}))
	stack := h.branchStack("app", "main")
	_, err := f.resolver.Resolve(ctx(t), stack)
	wantFault(t, err, pulumiv1.ReasonSourceUnavailable, false, []string{"refused the credentials"}, []string{"typo"})

	if err := f.resolver.Client.(client.Client).Update(ctx(t), h.secret); err != nil {
		t.Fatal(err)
	}
	if a := f.resolve(t, stack); a.Revision != h.first {
		t.Errorf("Revision = %s, want %s", a.Revision, h.first)
	}
}

// Fifty Stacks on one repository and credentials, resolved at once, cause one listing and
// one fetch per interval, and share one artifact.
func TestResolver_Resolve_ConcurrentStacksShareListingAndFetch(t *testing.T) {
	const stacks = 50
	h := newHTTPRepo(t)
	f := newFixture(t, h.secret)

	round := func() []source.Artifact {
		got := make([]source.Artifact, stacks)
		errs := make([]error, stacks)
		var wg sync.WaitGroup
		for i := range stacks {
			wg.Go(func() {
				got[i], errs[i] = f.resolver.Resolve(ctx(t), h.branchStack(fmt.Sprintf("app-%d", i), "main"))
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("Stack %d: Resolve() = %v", i, err)
			}
		}
		return got
	}

	start := time.Now()
	first := round()
	t.Logf("cold round: %d Stacks in %v, server counts %v", stacks, time.Since(start), h.server.Counts())
	for i, a := range first {
		if a.Revision != h.first || a.Digest != first[0].Digest {
			t.Errorf("Stack %d resolved to %+v, want %s / %s", i, a, h.first, first[0].Digest)
		}
	}
	if got, want := h.server.Counts(), [2]int64{1, 1}; got != want {
		t.Errorf("cold round: server saw %d listings and %d fetches, want %v", got[0], got[1], want)
	}

	second := h.repo.Commit(map[string]string{"shared/lib.txt": "shared v2"})
	f.clock.Advance(pulumiv1.DefaultResyncPeriod)
	start = time.Now()
	next := round()
	t.Logf("new-commit round: %d Stacks in %v, server counts %v", stacks, time.Since(start), h.server.Counts())
	for i, a := range next {
		if a.Revision != second {
			t.Errorf("Stack %d resolved to %s, want %s", i, a.Revision, second)
		}
	}
	if got, want := h.server.Counts(), [2]int64{2, 2}; got != want {
		t.Errorf("after a push: server saw %d listings and %d fetches in total, want %v", got[0], got[1], want)
	}
}

// Access tokens go as the HTTP password with the user name "git", as in PKO, and the
// deprecated gitAuthSecret reads PKO's keys.
func TestResolver_Resolve_HTTPCredentialForms(t *testing.T) {
	h := newHTTPRepo(t)
	tests := []struct {
		name   string
		auth   *pulumiv1.GitAuthConfig
		legacy string
		secret client.Object
	}{
		{
			name:   "access token from a Secret",
			auth:   &pulumiv1.GitAuthConfig{AccessToken: ptr(secretRef("token", "token"))},
			secret: secret("token", map[string]string{"token": testToken}),
		},
		{
			name: "basic auth from literals",
			auth: &pulumiv1.GitAuthConfig{BasicAuth: &pulumiv1.BasicAuth{UserName: literalRef(testUser), Password: literalRef(testPassword)}},
		},
		{
			name:   "gitAuthSecret with accessToken",
			legacy: "legacy",
			secret: secret("legacy", map[string]string{"accessToken": testToken}),
		},
		{
			name:   "gitAuthSecret with username and password",
			legacy: "legacy",
			secret: secret("legacy", map[string]string{"username": testUser, "password": testPassword}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.secret != nil {
				objs = append(objs, tc.secret)
			}
			f := newFixture(t, objs...)
			a := f.resolve(t, newStack("app", pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", RepoDir: "infra/app", GitAuth: tc.auth, GitAuthSecret: tc.legacy}))
			if a.Revision != h.first {
				t.Errorf("Revision = %s, want %s", a.Revision, h.first)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestInterval(t *testing.T) {
	tests := []struct {
		name    string
		seconds int64
		want    time.Duration
	}{
		{name: "unset is the PKO default", seconds: 0, want: time.Minute},
		{name: "below the floor is raised", seconds: 3, want: 10 * time.Second},
		{name: "floor", seconds: 10, want: 10 * time.Second},
		{name: "explicit", seconds: 300, want: 5 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack("s", pulumiv1.GitSource{ProjectRepo: "https://example.com/r.git", Branch: "main"})
			s.Spec.ResyncFrequencySeconds = tc.seconds
			if got := Interval(s); got != tc.want {
				t.Errorf("Interval() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCleanRepoDir(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
		err  bool
	}{
		{name: "empty is the root", in: "", want: ""},
		{name: "dot is the root", in: ".", want: ""},
		{name: "relative", in: "infra/app", want: "infra/app"},
		{name: "trailing slash", in: "infra/app/", want: "infra/app"},
		{name: "leading slash means the root, as PKO joined it", in: "/infra/app", want: "infra/app"},
		{name: "dot-dot escaping", in: "../x", err: true},
		{name: "dot-dot inside", in: "a/../b", err: true},
		{name: "backslash", in: `a\b`, err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cleanRepoDir(tc.in)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("cleanRepoDir(%q) = %q, %v; want %q, error %t", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestParseCommit(t *testing.T) {
	full := "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name string
		in   string
		want string
		err  string
	}{
		{name: "full SHA", in: full, want: full},
		{name: "uppercase SHA", in: strings.ToUpper(full), want: full},
		{name: "abbreviated SHA", in: full[:12], err: "abbreviated"},
		{name: "SHA-256", in: full + full[:24], err: "SHA-256"},
		{name: "branch name", in: "main", err: "not a commit SHA"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCommit(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("parseCommit(%q) = %v, want an error containing %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil || got.String() != tc.want {
				t.Errorf("parseCommit(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
			}
		})
	}
}
