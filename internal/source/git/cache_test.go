package git

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// identities lists the remote directories in the cache.
func identities(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		if isIdentity(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

func age(t *testing.T, path string, d time.Duration) {
	t.Helper()
	old := time.Now().Add(-d)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

// Collect removes the repositories no resolve has used for the retention, left by this
// run or an earlier one, never one in use; a remote removed is fetched again when needed.
func TestCache_Collect_RemovesOnlyUnusedRemotes(t *testing.T) {
	const retention = 24 * time.Hour
	h := newHTTPRepo(t)
	f := newFixture(t, h.secret)
	stack := h.branchStack("app", "main")
	f.resolve(t, stack)
	ids := identities(t, f.cacheDir)
	if len(ids) != 1 {
		t.Fatalf("cache holds %d remotes after one resolve, want 1", len(ids))
	}
	resolved := ids[0]
	// A remote of an earlier run of the manager, and one in use now.
	leftover := strings.Repeat("ab", 32)
	if err := os.MkdirAll(filepath.Join(f.cacheDir, leftover, "full"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, release, err := f.resolver.Cache.remote(testNamespace, h.server.URL+"/other.git", &credentials{})
	if err != nil {
		t.Fatal(err)
	}
	var inUse string
	for _, id := range identities(t, f.cacheDir) {
		if id != resolved && id != leftover {
			inUse = id
		}
	}
	for _, id := range []string{resolved, leftover, inUse} {
		age(t, filepath.Join(f.cacheDir, id), 2*retention)
	}

	removed, err := f.resolver.Cache.Collect(retention)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{inUse}, identities(t, f.cacheDir)); diff != "" || removed != 2 {
		t.Errorf("Collect() removed %d; remotes left (-want +got):\n%s", removed, diff)
	}
	release()
	if removed, err := f.resolver.Cache.Collect(retention); err != nil || removed != 1 {
		t.Errorf("Collect() after release = %d, %v; want the released remote removed", removed, err)
	}

	before := h.server.Counts()
	a := f.resolve(t, stack)
	if a.Revision != h.first {
		t.Errorf("Resolve() after Collect = revision %s, want %s", a.Revision, h.first)
	}
	if got := h.server.Counts(); got[1] != before[1]+1 {
		t.Errorf("server fetches %d -> %d; want the removed repository fetched again", before[1], got[1])
	}
	if _, err := os.Stat(filepath.Join(f.cacheDir, resolved, "full")); err != nil {
		t.Errorf("the remote's repository is not back after a resolve: %v", err)
	}
}
