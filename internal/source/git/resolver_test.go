package git

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
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

// Faults say what to fix, with the reason the Stack's conditions need, and never carry a
// credential.
func TestResolver_Resolve_Faults(t *testing.T) {
	h := newHTTPRepo(t)
	good := h.secret
	wrong := secret("wrong-creds", map[string]string{"username": testUser, "password": "not-the-password"})
	tests := []struct {
		name     string
		src      pulumiv1.GitSource
		objs     []client.Object
		reason   string
		stalled  bool
		contains []string
	}{
		{
			name:     "wrong password names the Secret",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", GitAuth: basicAuth("wrong-creds")},
			objs:     []client.Object{wrong},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`Secret "wrong-creds"`, "refused the credentials"},
		},
		{
			name:     "no credentials for a private repository",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main"},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{"requires credentials"},
		},
		{
			name:     "missing Secret",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", GitAuth: basicAuth("absent")},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`Secret "absent"`, "not found"},
		},
		{
			name:     "missing key",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", GitAuth: &pulumiv1.GitAuthConfig{BasicAuth: &pulumiv1.BasicAuth{UserName: secretRef("git-creds", "username"), Password: secretRef("git-creds", "pass")}}},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`Secret "git-creds" has no key "pass"`},
		},
		{
			name:     "gitAuthSecret without known keys",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", GitAuthSecret: "odd"},
			objs:     []client.Object{secret("odd", map[string]string{"token": "x"})},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`Secret "odd"`, `"accessToken"`},
		},
		{
			name: "cross-namespace Secret",
			src: pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", GitAuth: &pulumiv1.GitAuthConfig{AccessToken: &pulumiv1.ResourceRef{
				Type: pulumiv1.ResourceSelectorSecret, ResourceSelector: pulumiv1.ResourceSelector{Secret: &pulumiv1.SecretSelector{Namespace: "other", Name: "t", Key: "k"}},
			}}},
			reason:   pulumiv1.ReasonCrossNamespaceReference,
			stalled:  true,
			contains: []string{"other/t"},
		},
		{
			name: "Env reference",
			src: pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", GitAuth: &pulumiv1.GitAuthConfig{AccessToken: &pulumiv1.ResourceRef{
				Type: pulumiv1.ResourceSelectorEnv, ResourceSelector: pulumiv1.ResourceSelector{Env: &pulumiv1.EnvSelector{Name: "HOME"}},
			}}},
			reason:   pulumiv1.ReasonInvalidSpec,
			stalled:  true,
			contains: []string{"spec.gitAuth.accessToken", "Env"},
		},
		{
			name:     "nonexistent branch",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "feature/nope", GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`branch "feature/nope" not found`},
		},
		{
			name:     "nonexistent repository",
			src:      pulumiv1.GitSource{ProjectRepo: h.server.URL + "/nope.git", Branch: "main", GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{"nope.git"},
		},
		{
			name:     "unreachable server",
			src:      pulumiv1.GitSource{ProjectRepo: "http://127.0.0.1:1/infra.git", Branch: "main", GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{"127.0.0.1:1", "connection refused"},
		},
		{
			name:     "unknown commit",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Commit: strings.Repeat("ab", 20), GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{"commit " + strings.Repeat("ab", 20) + " not found"},
		},
		{
			name:     "abbreviated commit",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Commit: h.first[:7], GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonInvalidSpec,
			stalled:  true,
			contains: []string{"abbreviated", "40-character"},
		},
		{
			name:     "repoDir climbing out",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", RepoDir: "infra/../../etc", GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonInvalidSpec,
			stalled:  true,
			contains: []string{"infra/../../etc"},
		},
		{
			name:     "repoDir missing at the commit",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", RepoDir: "infra/missing", GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonInvalidSpec,
			stalled:  true,
			contains: []string{`"infra/missing" does not exist at commit ` + h.first},
		},
		{
			name:     "repoDir without Pulumi.yaml",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", RepoDir: "shared", GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonInvalidSpec,
			stalled:  true,
			contains: []string{`spec.repoDir "shared" has no Pulumi.yaml at commit ` + h.first},
		},
		{
			name:     "local path",
			src:      pulumiv1.GitSource{ProjectRepo: h.repo.Bare, Branch: "main"},
			reason:   pulumiv1.ReasonInvalidSpec,
			stalled:  true,
			contains: []string{"local path"},
		},
		{
			name:     "SSH key for an https URL",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", GitAuth: sshAuthFrom("ssh")},
			objs:     []client.Object{secret("ssh", map[string]string{"key": "k", KnownHostsKey: "x"})},
			reason:   pulumiv1.ReasonInvalidSpec,
			stalled:  true,
			contains: []string{"only works with SSH URLs"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objs...)
			_, err := f.resolver.Resolve(ctx(t), newStack("app", tc.src))
			wantFault(t, err, tc.reason, tc.stalled, tc.contains, []string{testPassword, "not-the-password", testToken})
		})
	}
}

// A tree beyond the manager's limits stalls with the limit in the message rather than
// filling the disk.
func TestResolver_Resolve_TreeOverLimits(t *testing.T) {
	h := newHTTPRepo(t)
	tests := []struct {
		name     string
		limits   artifact.Limits
		contains string
	}{
		{name: "too many files", limits: artifact.Limits{MaxFiles: 3}, contains: "more than 3 files and directories"},
		{name: "too many bytes", limits: artifact.Limits{MaxBytes: 10}, contains: "more than 10 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, h.secret)
			f.resolver.Limits = tc.limits
			_, err := f.resolver.Resolve(ctx(t), h.branchStack("app", "main"))
			wantFault(t, err, pulumiv1.ReasonInvalidSpec, true, []string{tc.contains, h.first}, nil)
		})
	}
}

// The cache on disk holds no credential, in file names or contents.
func TestCache_Remote_NoSecretsOnDisk(t *testing.T) {
	h := newHTTPRepo(t)
	f := newFixture(t, h.secret)
	f.resolve(t, h.branchStack("app", "main"))

	var files int
	err := filepath.WalkDir(f.cacheDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(p, testPassword) || strings.Contains(p, testUser) {
			t.Errorf("cache path %s contains a credential", p)
		}
		if d.IsDir() {
			return nil
		}
		files++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(testPassword)) || bytes.Contains(b, []byte(testUser)) {
			t.Errorf("cache file %s contains a credential", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("the cache is empty")
	}
}

// Shallow Stacks fetch only the wanted commit, and later commits fetched into the shallow
// repository still produce complete trees, including a file reverted to content that only
// history the cache never fetched holds.
func TestResolver_Resolve_ShallowFetch(t *testing.T) {
	h := newHTTPRepo(t)
	second := h.repo.Commit(map[string]string{"infra/app/main.txt": "v2", "shared/lib.txt": "shared v2"})
	f := newFixture(t, h.secret)
	stack := h.branchStack("app", "main")
	stack.Spec.Shallow = true

	a := f.resolve(t, stack)

	if a.Revision != second {
		t.Fatalf("Revision = %s, want %s", a.Revision, second)
	}
	rm := onlyRemote(t, f)
	if !rm.shallow.hasCommit(plumbing.NewHash(second)) || rm.shallow.hasCommit(plumbing.NewHash(h.first)) || rm.full.hasCommit(plumbing.NewHash(second)) {
		t.Errorf("want only %s, in the shallow repository", second)
	}

	third := h.repo.Commit(map[string]string{"infra/app/main.txt": "v1"})
	f.clock.Advance(Interval(stack))
	a = f.resolve(t, stack)
	if a.Revision != third {
		t.Fatalf("Revision = %s, want %s", a.Revision, third)
	}
	want := map[string]string{"infra/app/Pulumi.yaml": projectFiles1["infra/app/Pulumi.yaml"], "infra/app/main.txt": "v1", "shared/lib.txt": "shared v2", "README.md": "readme"}
	if diff := cmp.Diff(want, f.extract(t, a)); diff != "" {
		t.Errorf("artifact files (-want +got):\n%s", diff)
	}
	if rm.shallow.hasCommit(plumbing.NewHash(second)) != true || rm.shallow.hasCommit(plumbing.NewHash(h.first)) {
		t.Errorf("the shallow repository fetched history it does not need")
	}
}

// A pinned commit behind every branch tip is fetched even from a server that only lets
// clients ask for advertised commits (git's default): by fetching the branches.
// With uploadpack.allowReachableSHA1InWant it is fetched alone, at depth 1 when shallow.
func TestResolver_Resolve_PinnedCommitBehindTip(t *testing.T) {
	tests := []struct {
		name          string
		allowWant     bool
		shallow       bool
		wantInShallow bool
	}{
		{name: "default server fetches branches", allowWant: false, shallow: true, wantInShallow: false},
		{name: "server allowing reachable wants fetches the commit alone", allowWant: true, shallow: true, wantInShallow: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHTTPRepo(t)
			if tc.allowWant {
				h.repo.Configure("uploadpack.allowReachableSHA1InWant", "true")
			}
			h.repo.Commit(map[string]string{"infra/app/main.txt": "v2"})
			f := newFixture(t, h.secret)
			stack := newStack("pinned", pulumiv1.GitSource{ProjectRepo: h.url, Commit: strings.ToUpper(h.first), RepoDir: "/infra/app/", Shallow: tc.shallow, GitAuth: basicAuth(secretName)})

			a := f.resolve(t, stack)

			if want := (source.Artifact{Revision: h.first, Digest: a.Digest, Dir: "infra/app"}); a != want {
				t.Errorf("Resolve() = %+v, want %+v", a, want)
			}
			if got := f.extract(t, a)["infra/app/main.txt"]; got != "v1" {
				t.Errorf("main.txt = %q, want v1", got)
			}
			if got := onlyRemote(t, f).shallow.hasCommit(plumbing.NewHash(h.first)); got != tc.wantInShallow {
				t.Errorf("commit in the shallow repository = %t, want %t", got, tc.wantInShallow)
			}
		})
	}
}

func onlyRemote(t *testing.T, f *fixture) *remote {
	t.Helper()
	c := f.resolver.Cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.remotes) != 1 {
		t.Fatalf("cache has %d remotes, want 1", len(c.remotes))
	}
	for _, rm := range c.remotes {
		return rm
	}
	return nil
}

// sshRepo is a repository served over SSH with one accepted client key.
type sshRepo struct {
	server *sshServer
	url    string
	first  string
	key    []byte
}

func newSSHRepo(t *testing.T, passphrase string) *sshRepo {
	t.Helper()
	root := t.TempDir()
	_, first := gitserver.NewRepo(t, root, "infra", projectFiles1)
	key, pub := sshKey(t, passphrase)
	s := newSSHServer(t, root, pub)
	return &sshRepo{server: s, url: "ssh://git@" + s.addr + "/infra.git", first: first, key: key}
}

func TestResolver_Resolve_SSHKeyAuth(t *testing.T) {
	tests := []struct {
		name       string
		passphrase string
		auth       func(*sshRepo) (*pulumiv1.GitAuthConfig, string, client.Object)
	}{
		{
			name: "sshAuth with known_hosts next to the key",
			auth: func(r *sshRepo) (*pulumiv1.GitAuthConfig, string, client.Object) {
				return sshAuthFrom("ssh"), "", secret("ssh", map[string]string{"key": string(r.key), KnownHostsKey: knownHostsLine(r.server.addr, r.server.hostKey)})
			},
		},
		{
			name:       "sshAuth with a passphrase",
			passphrase: "key passphrase",
			auth: func(r *sshRepo) (*pulumiv1.GitAuthConfig, string, client.Object) {
				a := sshAuthFrom("ssh")
				a.SSHAuth.Password = ptr(secretRef("ssh", "passphrase"))
				return a, "", secret("ssh", map[string]string{"key": string(r.key), "passphrase": "key passphrase", KnownHostsKey: knownHostsLine(r.server.addr, r.server.hostKey)})
			},
		},
		{
			name: "gitAuthSecret with sshPrivateKey",
			auth: func(r *sshRepo) (*pulumiv1.GitAuthConfig, string, client.Object) {
				return nil, "legacy", secret("legacy", map[string]string{"sshPrivateKey": string(r.key), KnownHostsKey: knownHostsLine(r.server.addr, r.server.hostKey)})
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newSSHRepo(t, tc.passphrase)
			auth, legacy, obj := tc.auth(r)
			f := newFixture(t, obj)
			stack := newStack("app", pulumiv1.GitSource{ProjectRepo: r.url, Branch: "main", RepoDir: "infra/app", GitAuth: auth, GitAuthSecret: legacy})

			a := f.resolve(t, stack)

			if a.Revision != r.first {
				t.Errorf("Revision = %s, want %s", a.Revision, r.first)
			}
			if got := f.extract(t, a)["infra/app/Pulumi.yaml"]; got != projectFiles1["infra/app/Pulumi.yaml"] {
				t.Errorf("Pulumi.yaml = %q", got)
			}
			// The listing and the fetch share one SSH connection.
			if got := r.server.execs.Load(); got != 1 {
				t.Errorf("server ran git-upload-pack %d times, want 1", got)
			}
		})
	}
}

func TestResolver_Resolve_SSHFaults(t *testing.T) {
	r := newSSHRepo(t, "")
	_, otherHost := sshKey(t, "")
	otherKey, _ := sshKey(t, "")
	goodHosts := knownHostsLine(r.server.addr, r.server.hostKey)
	tests := []struct {
		name     string
		data     map[string]string
		auth     *pulumiv1.GitAuthConfig
		reason   string
		stalled  bool
		contains []string
	}{
		{
			name:     "no known_hosts",
			data:     map[string]string{"key": string(r.key)},
			reason:   pulumiv1.ReasonInvalidSpec,
			stalled:  true,
			contains: []string{`Secret "ssh" has no "known_hosts" key`, "ssh-keyscan"},
		},
		{
			name:     "known_hosts with another key for the host",
			data:     map[string]string{"key": string(r.key), KnownHostsKey: knownHostsLine(r.server.addr, otherHost)},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{"host key does not match", `Secret "ssh"`},
		},
		{
			name:     "known_hosts without the host",
			data:     map[string]string{"key": string(r.key), KnownHostsKey: knownHostsLine("192.0.2.1:22", r.server.hostKey)},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{"no host key for 127.0.0.1"},
		},
		{
			name:     "key the server does not accept",
			data:     map[string]string{"key": string(otherKey), KnownHostsKey: goodHosts},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`refused the credentials from Secret "ssh"`},
		},
		{
			name:     "not a private key",
			data:     map[string]string{"key": "garbage", KnownHostsKey: goodHosts},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`SSH private key from Secret "ssh"`},
		},
		{
			name:     "literal key has no known_hosts",
			auth:     &pulumiv1.GitAuthConfig{SSHAuth: &pulumiv1.SSHAuth{SSHPrivateKey: literalRef(string(r.key))}},
			reason:   pulumiv1.ReasonInvalidSpec,
			stalled:  true,
			contains: []string{"not a Secret reference"},
		},
		{
			name:     "no credentials",
			auth:     &pulumiv1.GitAuthConfig{},
			reason:   pulumiv1.ReasonInvalidSpec,
			stalled:  true,
			contains: []string{"must set one of"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.data != nil {
				objs = append(objs, secret("ssh", tc.data))
			}
			auth := tc.auth
			if auth == nil {
				auth = sshAuthFrom("ssh")
			}
			f := newFixture(t, objs...)
			_, err := f.resolver.Resolve(ctx(t), newStack("app", pulumiv1.GitSource{ProjectRepo: r.url, Branch: "main", GitAuth: auth}))
			wantFault(t, err, tc.reason, tc.stalled, tc.contains, []string{string(r.key), "PRIVATE KEY"})
		})
	}
}

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
