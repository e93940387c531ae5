package git

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-cmp/cmp"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/source"
)

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
