package git

import (
	"testing"
)

// A push notification makes the next resolve list the refs at once, however recent the
// cached listing and however the Stack spells the repository's URL; a poke of another
// repository costs the server nothing.
func TestCache_Poke_NextResolveListsAnew(t *testing.T) {
	h := newHTTPRepo(t)
	f := newFixture(t, h.secret)
	stack := h.branchStack("app", "main")
	first := f.resolve(t, stack)
	second := h.repo.Commit(map[string]string{"infra/app/main.txt": "v2"})

	if n := f.resolver.Cache.Poke("https://elsewhere.example.com/infra.git"); n != 0 {
		t.Errorf("Poke(another repository) = %d remotes, want 0", n)
	}
	if a := f.resolve(t, stack); a != first {
		t.Errorf("after poking another repository Resolve() = %+v, want the memoised %+v", a, first)
	}
	if got, want := h.server.Counts(), [2]int64{1, 1}; got != want {
		t.Errorf("after poking another repository: %v requests, want %v", got, want)
	}

	// The web URL of the same repository, as a push notification names it.
	if n := f.resolver.Cache.Poke(h.url[:len(h.url)-len(".git")] + "/"); n != 1 {
		t.Errorf("Poke(the repository) = %d remotes, want 1", n)
	}
	a := f.resolve(t, stack)
	if a.Revision != second {
		t.Errorf("after the poke Resolve() = %+v, want revision %s", a, second)
	}
	if got, want := h.server.Counts(), [2]int64{2, 2}; got != want {
		t.Errorf("after the poke: %v requests, want %v (one listing, one fetch)", got, want)
	}
	if again := f.resolve(t, stack); again != a {
		t.Errorf("a second resolve after one poke Resolve() = %+v, want %+v", again, a)
	}
	if got, want := h.server.Counts(), [2]int64{2, 2}; got != want {
		t.Errorf("one poke, one listing: %v requests, want %v", got, want)
	}
}

func TestRepoKey_Spellings_OfOneRepositoryAgree(t *testing.T) {
	for _, tc := range []struct {
		reason, url, want string
	}{
		{"https clone URL", "https://github.com/Acme/Infra.git", "github.com/acme/infra"},
		{"web URL with a trailing slash", "https://github.com/acme/infra/", "github.com/acme/infra"},
		{"scp-like SSH", "git@github.com:acme/infra.git", "github.com/acme/infra"},
		{"SSH URL with a port", "ssh://git@github.com:22/acme/infra", "github.com/acme/infra"},
		{"credentials are not part of it", "https://user:secret@github.com/acme/infra.git", "github.com/acme/infra"},
		{"git protocol", "git://github.com/acme/infra.git", "github.com/acme/infra"},
		{"nested groups", "https://gitlab.com/a/b/c.git", "gitlab.com/a/b/c"},
		{"a local path is no repository", "/srv/git/infra.git", ""},
		{"a file URL is no repository", "file:///srv/git/infra.git", ""},
		{"no path", "https://github.com/", ""},
		{"empty", "", ""},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			if got := RepoKey(tc.url); got != tc.want {
				t.Errorf("RepoKey(%q) = %q, want %q", tc.url, got, tc.want)
			}
		})
	}
}
