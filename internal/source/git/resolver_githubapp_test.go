package git

import (
	"bytes"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/source/git/githubapp"
	"github.com/stackwright/stackwright/internal/testing/githubapi"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

const (
	appSecretName  = "github-app"
	appID          = 4242
	appInstall     = 777
	appTokenTTL    = time.Hour
	appNotReadable = "unreadable"
)

// appRepo is a repository on a GitHub Enterprise-like HTTPS host: git over smart HTTP that
// accepts only the app's unexpired installation tokens, and the app's token endpoint under
// /api/v3 on the same host, where the API URL derived from the repository's host leads.
type appRepo struct {
	repo   *gitserver.Repo
	server *gitserver.HTTPServer
	app    *githubapi.App
	url    string
	first  string
	// secret holds the app's credentials.
	secret client.Object
}

// newAppRepo serves the repository and points f's cache at it (trusting its certificate),
// tokens aging on f's clock.
func newAppRepo(t *testing.T, f *fixture) *appRepo {
	t.Helper()
	root := t.TempDir()
	r, first := gitserver.NewRepo(t, root, "infra", projectFiles1)
	app := githubapi.NewApp(t, appID, appInstall, appTokenTTL, f.clock.Now)
	s := gitserver.NewHTTPServerWith(t, root, gitserver.Options{
		TLS:       true,
		Authorize: app.Valid,
		Handlers: map[string]http.Handler{
			"/api/v3/": app,
			// GitHub answers 401 for a repository the installation was not granted,
			// whatever the token.
			"/" + appNotReadable + ".git/": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
			}),
		},
	})
	f.resolver.Cache.UseTransport(s.Client().Transport, f.clock.Now)
	return &appRepo{
		repo: r, server: s, app: app, url: s.URL + "/infra.git", first: first,
		secret: secret(appSecretName, map[string]string{"appID": "4242", "installationID": "777", "privateKey": app.PrivateKeyPEM}),
	}
}

func githubAppAuth(secretName string) *pulumiv1.GitAuthConfig {
	return &pulumiv1.GitAuthConfig{GitHubApp: &pulumiv1.GitHubAppAuth{
		AppID: secretRef(secretName, "appID"), InstallationID: secretRef(secretName, "installationID"), PrivateKey: secretRef(secretName, "privateKey"),
	}}
}

func (a *appRepo) branchStack(name string) *pulumiv1.Stack {
	return newStack(name, pulumiv1.GitSource{ProjectRepo: a.url, Branch: "main", RepoDir: "infra/app", GitAuth: githubAppAuth(appSecretName)})
}

// counts are what the host saw: token requests, git listings and fetches, and requests
// refused for their credentials.
type counts struct {
	Tokens, Listings, Fetches, Refused int64
}

func (a *appRepo) counts() counts {
	served, _ := a.app.Requests()
	c := a.server.Counts()
	return counts{Tokens: int64(served), Listings: c[0], Fetches: c[1], Refused: a.server.Refused()}
}

// fixtureWithApp is a fixture whose API server holds the app's Secret.
func fixtureWithApp(t *testing.T, objs ...client.Object) (*fixture, *appRepo) {
	t.Helper()
	// The Secret needs the app's key, the app needs the fixture's clock: build the
	// fixture, then give its fake API server the Secret.
	f := newFixture(t)
	a := newAppRepo(t, f)
	f.resolver.Client = fakeClientWith(append(objs, a.secret)...)
	return f, a
}

// The first resolve mints a token and lists and fetches with it; later resolves reuse it,
// a new commit included.
func TestResolver_Resolve_GitHubAppTokenMintedAndReused(t *testing.T) {
	f, a := fixtureWithApp(t)
	stack := a.branchStack("app")

	got := f.resolve(t, stack)
	if got.Revision != a.first {
		t.Errorf("Resolve() revision = %s, want %s", got.Revision, a.first)
	}
	if diff := cmp.Diff(projectFiles1, f.extract(t, got)); diff != "" {
		t.Errorf("artifact files (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(counts{Tokens: 1, Listings: 1, Fetches: 1}, a.counts()); diff != "" {
		t.Errorf("first resolve (-want +got):\n%s", diff)
	}

	second := a.repo.Commit(map[string]string{"infra/app/main.txt": "v2"})
	f.clock.Advance(Interval(stack))
	if got := f.resolve(t, stack); got.Revision != second {
		t.Errorf("after a push Resolve() revision = %s, want %s", got.Revision, second)
	}
	f.clock.Advance(Interval(stack))
	f.resolve(t, stack)
	if diff := cmp.Diff(counts{Tokens: 1, Listings: 3, Fetches: 2}, a.counts()); diff != "" {
		t.Errorf("later resolves should reuse the token (-want +got):\n%s", diff)
	}
}

// A token about to expire is replaced before it is sent, so the host never sees an expired
// one; a push made after the first token expired is fetched with its successor.
func TestResolver_Resolve_GitHubAppTokenRotation(t *testing.T) {
	f, a := fixtureWithApp(t)
	stack := a.branchStack("app")
	f.resolve(t, stack)
	first := a.app.Issued()[0]

	// Inside the refresh margin: the first token is still valid, yet replaced.
	second := a.repo.Commit(map[string]string{"infra/app/main.txt": "v2"})
	f.clock.Advance(appTokenTTL - githubapp.DefaultRefreshBefore + time.Second)
	if got := f.resolve(t, stack); got.Revision != second {
		t.Errorf("inside the margin Resolve() revision = %s, want %s", got.Revision, second)
	}
	if n := len(a.app.Issued()); n != 2 {
		t.Fatalf("%d tokens issued inside the margin, want 2", n)
	}

	// The first token has expired: a push is fetched with the second.
	f.clock.Advance(githubapp.DefaultRefreshBefore)
	if a.app.Valid(githubapi.Username, first) {
		t.Fatal("the first token should have expired by now")
	}
	third := a.repo.Commit(map[string]string{"infra/app/main.txt": "v3"})
	if got := f.resolve(t, stack); got.Revision != third {
		t.Errorf("after the first token expired Resolve() revision = %s, want %s", got.Revision, third)
	}

	// Long after: every token issued so far has expired, and a third is minted.
	f.clock.Advance(2 * appTokenTTL)
	fourth := a.repo.Commit(map[string]string{"infra/app/main.txt": "v4"})
	if got := f.resolve(t, stack); got.Revision != fourth {
		t.Errorf("after every token expired Resolve() revision = %s, want %s", got.Revision, fourth)
	}
	if diff := cmp.Diff(counts{Tokens: 3, Listings: 4, Fetches: 4}, a.counts()); diff != "" {
		t.Errorf("host saw (-want +got):\n%s", diff)
	}
}

// A cached token the host refuses (the app was reinstalled, say) is replaced at once,
// within the same resolve.
func TestResolver_Resolve_GitHubAppRevokedTokenReplaced(t *testing.T) {
	f, a := fixtureWithApp(t)
	stack := a.branchStack("app")
	f.resolve(t, stack)

	f.clock.Advance(2 * time.Minute)
	a.app.Revoke()
	second := a.repo.Commit(map[string]string{"infra/app/main.txt": "v2"})
	if got := f.resolve(t, stack); got.Revision != second {
		t.Errorf("after revocation Resolve() revision = %s, want %s", got.Revision, second)
	}
	if diff := cmp.Diff(counts{Tokens: 2, Listings: 2, Fetches: 2, Refused: 1}, a.counts()); diff != "" {
		t.Errorf("host saw (-want +got):\n%s", diff)
	}
}

// Wrong credentials, and credentials for a host that does not let the app read the
// repository, are refused with a message naming the Secret and what to fix, never the
// private key or a token.
func TestResolver_Resolve_GitHubAppFaults(t *testing.T) {
	otherKey := githubapi.EncodeKey(githubapi.NewKey(t))
	tests := []struct {
		name       string
		data       map[string]string
		url        func(*appRepo) string
		reason     string
		stalled    bool
		contains   []string
		wantTokens int
	}{
		{
			name:       "another app's key",
			data:       map[string]string{"privateKey": otherKey},
			reason:     pulumiv1.ReasonSourceUnavailable,
			contains:   []string{`Secret "github-app" (spec.gitAuth.githubApp)`, "refused the app's credentials (401 Unauthorized)", "/api/v3"},
			wantTokens: 1,
		},
		{
			name:       "wrong app ID",
			data:       map[string]string{"appID": "4243"},
			reason:     pulumiv1.ReasonSourceUnavailable,
			contains:   []string{"the private key is not app 4243's, or the app ID is wrong"},
			wantTokens: 1,
		},
		{
			name:       "wrong installation",
			data:       map[string]string{"installationID": "778"},
			reason:     pulumiv1.ReasonSourceUnavailable,
			contains:   []string{"has no installation 778 of app 4242 (404 Not Found)"},
			wantTokens: 1,
		},
		{
			name:     "app ID not a number",
			data:     map[string]string{"appID": "my-app"},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`spec.gitAuth.githubApp.appID (Secret "github-app", key "appID") is not a GitHub ID`},
		},
		{
			name:     "not a key",
			data:     map[string]string{"privateKey": "ghp_a-personal-token-in-the-wrong-key"},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{"not a PEM-encoded RSA private key"},
		},
		{
			name:     "SSH URL",
			url:      func(*appRepo) string { return "ssh://git@127.0.0.1:1/infra.git" },
			reason:   pulumiv1.ReasonSpecInvalid,
			stalled:  true,
			contains: []string{"spec.gitAuth.githubApp gives GitHub App installation tokens, which only work with https URLs"},
		},
		{
			name:       "installation cannot read the repository",
			url:        func(a *appRepo) string { return a.server.URL + "/" + appNotReadable + ".git" },
			reason:     pulumiv1.ReasonSourceUnavailable,
			contains:   []string{"the server refused the GitHub App installation token", `Secret "github-app"`},
			wantTokens: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			a := newAppRepo(t, f)
			data := map[string]string{"appID": "4242", "installationID": "777", "privateKey": a.app.PrivateKeyPEM}
			for k, v := range tt.data {
				data[k] = v
			}
			f.resolver.Client = fakeClientWith(secret(appSecretName, data))
			stack := a.branchStack("app")
			if tt.url != nil {
				stack.Spec.ProjectRepo = tt.url(a)
			}
			_, err := f.resolver.Resolve(ctx(t), stack)
			excludes := append(keyLines(data["privateKey"]), keyLines(a.app.PrivateKeyPEM)...)
			excludes = append(excludes, a.app.Issued()...)
			wantFault(t, err, tt.reason, tt.stalled, tt.contains, excludes)
			if served, _ := a.app.Requests(); served != tt.wantTokens {
				t.Errorf("API served %d token requests, want %d", served, tt.wantTokens)
			}
		})
	}
}

// keyLines are the lines of a PEM key that could be quoted.
func keyLines(pem string) []string {
	var out []string
	for line := range strings.SplitSeq(pem, "\n") {
		if len(line) > 8 && !strings.HasPrefix(line, "-----") {
			out = append(out, line)
		}
	}
	return out
}

func fakeClientWith(objs ...client.Object) client.Reader {
	return fake.NewClientBuilder().WithObjects(objs...).Build()
}

// The cache on disk holds neither the app's private key nor a token.
func TestCache_Remote_NoGitHubAppSecretsOnDisk(t *testing.T) {
	f, a := fixtureWithApp(t)
	f.resolve(t, a.branchStack("app"))
	needles := append(keyLines(a.app.PrivateKeyPEM), a.app.Issued()...)
	err := filepath.WalkDir(f.cacheDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, n := range needles {
			if bytes.Contains(b, []byte(n)) || strings.Contains(p, n) {
				t.Errorf("cache file %s holds a credential", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
