package git

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/budget"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

// bigFiles is projectFiles1 with a file of n random (incompressible) bytes, so that its
// pack is at least n bytes.
func bigFiles(t *testing.T, n int) map[string]string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"infra/app/blob.bin": string(b)}
	for k, v := range projectFiles1 {
		files[k] = v
	}
	return files
}

// withLimits replaces the fixture's cache by one with lim over the same directory, as a
// manager restarted with other flags would.
func (f *fixture) withLimits(lim CacheLimits) {
	f.resolver.Cache = NewCacheWithLimits(f.cacheDir, lim)
}

// packFiles lists the pack files and go-git temporary files in the cache.
func packFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if name := d.Name(); strings.HasSuffix(name, ".pack") || strings.HasPrefix(name, "tmp_") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// openUnder lists the files under dir this process holds open (deleted ones included):
// a partial pack removed but still open takes its space until it is closed.
func openUnder(t *testing.T, dir string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list open files: %v", err)
	}
	var out []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir) {
			out = append(out, target)
		}
	}
	return out
}

// A fetch over the fetch cap fails with a stalled fault naming the cap and its flag,
// leaves no pack (partial or whole) on disk nor open, is not downloaded again by the next
// resolve, and succeeds once the cap is raised.
func TestResolver_Resolve_FetchCap(t *testing.T) {
	const limit = 64 << 10
	tests := []struct {
		name     string
		protocol string
		shallow  bool
		contains []string
		excludes []string
	}{
		{
			name:     "http fetch over the cap suggests a shallow fetch",
			protocol: "http",
			contains: []string{"the fetch exceeded 64 KiB (--max-git-fetch-bytes)", "spec.shallow", "raise the cap"},
		},
		{
			name:     "http shallow fetch over the cap only suggests raising it",
			protocol: "http",
			shallow:  true,
			contains: []string{"the fetch exceeded 64 KiB (--max-git-fetch-bytes)", "raise the cap"},
			excludes: []string{"spec.shallow"},
		},
		{
			name:     "ssh fetch over the cap is counted on the stream",
			protocol: "ssh",
			contains: []string{"the fetch exceeded 64 KiB (--max-git-fetch-bytes)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			_, first := gitserver.NewRepo(t, root, "infra", bigFiles(t, 1<<20))
			var (
				src     = pulumiv1.GitSource{Branch: "main", RepoDir: "infra/app", Shallow: tc.shallow}
				objs    []client.Object
				fetches func() int64
			)
			switch tc.protocol {
			case "http":
				s := gitserver.NewHTTPServer(t, root, nil)
				src.ProjectRepo = s.URL + "/infra.git"
				fetches = func() int64 { return s.Counts()[1] }
			case "ssh":
				key, pub := sshKey(t, "")
				s := newSSHServer(t, root, pub)
				src.ProjectRepo = "ssh://git@" + s.addr + "/infra.git"
				src.GitAuth = sshAuthFrom("ssh")
				objs = append(objs, secret("ssh", map[string]string{"key": string(key), KnownHostsKey: knownHostsLine(s.addr, s.hostKey)}))
				fetches = s.execs.Load
			}
			f := newFixture(t, objs...)
			f.withLimits(CacheLimits{MaxFetchBytes: limit})
			stack := newStack("big", src)

			_, err := f.resolver.Resolve(ctx(t), stack)

			wantFault(t, err, pulumiv1.ReasonSourceUnavailable, true, tc.contains, tc.excludes)
			if got := packFiles(t, f.cacheDir); len(got) != 0 {
				t.Errorf("pack files left in the cache: %v", got)
			}
			if got := openUnder(t, f.cacheDir); len(got) != 0 {
				t.Errorf("files in the cache still open: %v", got)
			}
			if got := onlyRemote(t, f).size.Load(); got >= limit {
				t.Errorf("remote size = %d after the failed fetch, want under the cap %d", got, limit)
			}

			before := fetches()
			_, again := f.resolver.Resolve(ctx(t), stack)
			wantFault(t, again, pulumiv1.ReasonSourceUnavailable, true, tc.contains, tc.excludes)
			if after := fetches(); after != before {
				t.Errorf("server fetches %d -> %d; want the overrun remembered", before, after)
			}

			f.withLimits(CacheLimits{MaxFetchBytes: 8 << 20})
			a := f.resolve(t, stack)
			if a.Revision != first {
				t.Errorf("Revision = %s, want %s", a.Revision, first)
			}
			if got := len(f.extract(t, a)["infra/app/blob.bin"]); got != 1<<20 {
				t.Errorf("blob.bin has %d bytes, want %d", got, 1<<20)
			}
		})
	}
}

// An HTTP ref listing over the listing cap stalls with a fault naming the cap.
func TestResolver_Resolve_ListCap(t *testing.T) {
	h := newHTTPRepo(t)
	f := newFixture(t, h.secret)
	f.withLimits(CacheLimits{MaxListBytes: 100})

	_, err := f.resolver.Resolve(ctx(t), h.branchStack("app", "main"))

	wantFault(t, err, pulumiv1.ReasonSourceUnavailable, true, []string{"list the refs of", "the ref listing exceeded 100 bytes (--max-git-list-bytes)"}, nil)
}

// A namespace whose repositories take its cap of the cache is refused fetches, naming the
// namespace, its usage and the cap, while another namespace still fetches; a repository
// shared by two namespaces counts against both; a namespace stops paying for a repository
// its Stacks no longer use once the collector's retention has passed.
func TestResolver_Resolve_NamespaceCacheCap(t *testing.T) {
	const limit = 512 << 10
	root := t.TempDir()
	for _, name := range []string{"big1", "big2", "small"} {
		files := projectFiles1
		if name != "small" {
			files = bigFiles(t, 1<<20)
		}
		gitserver.NewRepo(t, root, name, files)
	}
	s := gitserver.NewHTTPServer(t, root, nil)
	f := newFixture(t)
	f.withLimits(CacheLimits{MaxNamespaceBytes: limit})
	resolve := func(ns, repo string) error {
		stack := newStack("app-"+repo, pulumiv1.GitSource{ProjectRepo: s.URL + "/" + repo + ".git", Branch: "main", RepoDir: "infra/app"})
		stack.Namespace = ns
		_, err := f.resolver.Resolve(ctx(t), stack)
		return err
	}
	usage := func(ns string) int64 {
		c := f.resolver.Cache
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.usage(ns)
	}
	refused := func(ns string) []string {
		return []string{fmt.Sprintf("namespace %q", ns), artifact.FormatBytes(usage(ns)), "512 KiB", "--" + FlagMaxNamespaceBytes}
	}

	steps := []struct {
		name    string
		ns      string
		repo    string
		refused bool
		cached  bool
	}{
		{name: "a namespace under its cap fetches", ns: "a", repo: "big1"},
		{name: "a namespace over its cap is refused", ns: "a", repo: "big2", refused: true},
		{name: "another namespace still fetches", ns: "b", repo: "big2"},
		{name: "a refused namespace is served a commit another fetched", ns: "a", repo: "big2", cached: true},
		{name: "a cached repository needs no fetch", ns: "b", repo: "big1", cached: true},
		{name: "a shared repository counts against each namespace", ns: "b", repo: "small", refused: true},
	}
	for _, st := range steps {
		fetches := s.Counts()[1]
		err := resolve(st.ns, st.repo)
		if st.refused {
			wantFault(t, err, pulumiv1.ReasonSourceUnavailable, false, refused(st.ns), nil)
			continue
		}
		if err != nil {
			t.Fatalf("%s: Resolve(%s, %s) = %v", st.name, st.ns, st.repo, err)
		}
		if st.cached && s.Counts()[1] != fetches {
			t.Errorf("%s: the server was asked for a pack", st.name)
		}
	}
	if a, b := usage("a"), usage("b"); a != b || a < 2<<20 {
		t.Errorf("usage of a = %d, of b = %d; want both big1 and big2, over 2 MiB", a, b)
	}

	// b stops using its repositories, a keeps using big1 and big2: once b's use is older
	// than the retention, b pays for nothing.
	const retention = time.Hour
	c := f.resolver.Cache
	c.mu.Lock()
	for _, rm := range c.remotes {
		if _, ok := rm.namespaces["b"]; ok {
			rm.namespaces["b"] = time.Now().Add(-2 * retention)
		}
	}
	c.mu.Unlock()
	if _, err := c.Collect(retention); err != nil {
		t.Fatal(err)
	}
	if err := resolve("a", "small"); err == nil {
		t.Errorf("Resolve(a, small) = nil, want a still over its cap")
	}
	if err := resolve("b", "small"); err != nil {
		t.Errorf("Resolve(b, small) after b's use expired = %v", err)
	}
}

func TestMeter_Read_StopsAtCap(t *testing.T) {
	tests := []struct {
		name     string
		limit    int64
		input    int
		wantRead int
		wantOver bool
	}{
		{name: "under the cap reads everything", limit: 100, input: 99, wantRead: 99},
		{name: "exactly the cap reads everything", limit: 100, input: 100, wantRead: 100},
		{name: "over the cap stops at the cap", limit: 100, input: 101, wantRead: 100, wantOver: true},
		{name: "no cap reads everything", limit: 0, input: 1 << 20, wantRead: 1 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMeter("fetch", tc.limit, FlagMaxFetchBytes)
			n, err := io.Copy(io.Discard, m.reader(strings.NewReader(strings.Repeat("x", tc.input))))
			if int(n) != tc.wantRead {
				t.Errorf("read %d bytes, want %d", n, tc.wantRead)
			}
			if over := m.exceeded() != nil; over != tc.wantOver || (err != nil) != tc.wantOver {
				t.Errorf("exceeded = %t, err = %v; want over %t", over, err, tc.wantOver)
			}
		})
	}
}

// A partial pack left by a manager killed mid-fetch is removed by the next fetch into its
// repository: nothing else would ever remove it.
func TestResolver_Resolve_RemovesPartialPacksOfEarlierRuns(t *testing.T) {
	h := newHTTPRepo(t)
	f := newFixture(t, h.secret)
	stack := h.branchStack("app", "main")
	f.resolve(t, stack)
	leftover := filepath.Join(onlyRemote(t, f).full.dir, "objects", "pack", "tmp_pack_123")
	if err := os.WriteFile(leftover, []byte("PACK partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	second := h.repo.Commit(map[string]string{"infra/app/main.txt": "v2"})
	f.clock.Advance(Interval(stack))

	if a := f.resolve(t, stack); a.Revision != second {
		t.Fatalf("Revision = %s, want %s", a.Revision, second)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("partial pack of an earlier run still there: %v", err)
	}
}

// A server that never stops advertising refs is cut off at the listing cap over every
// transport, not only HTTP: go-git holds a listing in memory whole, so an SSH or git://
// listing left unbounded would grow the manager until it is killed, again after every
// restart.
func TestResolver_Resolve_ListCapEveryTransport(t *testing.T) {
	const limit = 1 << 20
	root := t.TempDir()
	key, pub := sshKey(t, "")
	sshd := newSSHServer(t, root, pub)
	daemon := newGitDaemon(t, root)
	for _, tc := range []struct {
		name string
		url  string
		auth *pulumiv1.GitAuthConfig
		objs []client.Object
		sent func() int64
	}{
		{name: "git", url: "git://" + daemon.addr + "/" + endlessRepo, sent: daemon.sent.Load},
		{
			name: "ssh", url: "ssh://git@" + sshd.addr + "/" + endlessRepo, auth: sshAuthFrom("ssh"),
			objs: []client.Object{secret("ssh", map[string]string{"key": string(key), KnownHostsKey: knownHostsLine(sshd.addr, sshd.hostKey)})},
			sent: sshd.sent.Load,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objs...)
			f.withLimits(CacheLimits{MaxListBytes: limit})

			_, err := f.resolver.Resolve(ctx(t), newStack("app", pulumiv1.GitSource{ProjectRepo: tc.url, Branch: "main", GitAuth: tc.auth}))

			wantFault(t, err, pulumiv1.ReasonSourceUnavailable, true, []string{"list the refs of", "the ref listing exceeded 1 MiB (--max-git-list-bytes)"}, nil)
			// The server stops once its writes fail: what it sent is the cap plus what the
			// kernel's buffers and the SSH window held.
			deadline := time.Now().Add(10 * time.Second)
			for tc.sent() == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := tc.sent(); n == 0 || n > 16*limit {
				t.Errorf("the server sent %d bytes; want it cut off near %d", n, limit)
			}
		})
	}
}

// A git:// repository is fetched through the counting relay, and the server sees the host
// the Stack named, not the relay's.
func TestResolver_Resolve_GitProtocol(t *testing.T) {
	root := t.TempDir()
	_, first := gitserver.NewRepo(t, root, "infra", projectFiles1)
	daemon := newGitDaemon(t, root)
	f := newFixture(t)

	a := f.resolve(t, newStack("app", pulumiv1.GitSource{ProjectRepo: "git://" + daemon.addr + "/infra.git", Branch: "main", RepoDir: "infra/app"}))

	if a.Revision != first {
		t.Errorf("Revision = %s, want %s", a.Revision, first)
	}
	if got := f.extract(t, a)["infra/app/Pulumi.yaml"]; got != projectFiles1["infra/app/Pulumi.yaml"] {
		t.Errorf("Pulumi.yaml = %q", got)
	}
	if diff := cmp.Diff([]string{daemon.addr}, daemon.requestHosts()); diff != "" {
		t.Errorf("hosts the server was asked for (-want +got):\n%s", diff)
	}
}

// A fetch that could leave the data volume with less than the space kept free is refused
// before it starts, as a retry (room may be made), saying why.
func TestResolver_Resolve_RefusesFetchOnAFullVolume(t *testing.T) {
	h := newHTTPRepo(t)
	f := newFixture(t, h.secret)
	// More than any volume has free.
	f.withLimits(CacheLimits{MaxFetchBytes: 512 << 20, MinFreeBytes: 1 << 60})

	_, err := f.resolver.Resolve(ctx(t), h.branchStack("app", "main"))

	wantFault(t, err, pulumiv1.ReasonSourceUnavailable, false, []string{"cannot fetch commit", "this may write plus the 1 EiB kept free (--min-free-data-bytes)"}, nil)
}

// Every transport's ref listing is charged to the manager's memory budget while it is held:
// with the budget spent (the endless listing of another tenant, say) a listing fails at
// once, as something to retry, naming the flag; nothing stays charged after a listing,
// whether it fit or not.
func TestResolver_Resolve_ListingChargedToTheMemoryBudget(t *testing.T) {
	root := t.TempDir()
	key, pub := sshKey(t, "")
	sshd := newSSHServer(t, root, pub)
	daemon := newGitDaemon(t, root)
	h := newHTTPRepo(t)
	for _, tc := range []struct {
		name  string
		url   string
		stack *pulumiv1.Stack
		objs  []client.Object
	}{
		{name: "http", stack: h.branchStack("app", "main"), objs: []client.Object{h.secret}},
		{name: "git", stack: newStack("app", pulumiv1.GitSource{ProjectRepo: "git://" + daemon.addr + "/" + endlessRepo, Branch: "main"})},
		{
			name: "ssh", stack: newStack("app", pulumiv1.GitSource{ProjectRepo: "ssh://git@" + sshd.addr + "/" + endlessRepo, Branch: "main", GitAuth: sshAuthFrom("ssh")}),
			objs: []client.Object{secret("ssh", map[string]string{"key": string(key), KnownHostsKey: knownHostsLine(sshd.addr, sshd.hostKey)})},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := budget.New(64 << 10)
			other := mem.Charge()
			if err := other.Take(64<<10 - 16); err != nil {
				t.Fatal(err)
			}
			f := newFixture(t, tc.objs...)
			f.withLimits(CacheLimits{MaxListBytes: 1 << 20, Memory: mem})

			_, err := f.resolver.Resolve(ctx(t), tc.stack)

			wantFault(t, err, pulumiv1.ReasonSourceUnavailable, false, []string{"list the refs of", "memory budget for tenant input is spent", "--" + budget.Flag}, nil)
			other.Release()
			if got := mem.InUse(); got != 0 {
				t.Errorf("%d bytes still charged after the listing failed", got)
			}
		})
	}
	t.Run("fits", func(t *testing.T) {
		mem := budget.New(1 << 20)
		f := newFixture(t, h.secret)
		f.withLimits(CacheLimits{Memory: mem})
		f.resolve(t, h.branchStack("app", "main"))
		if got := mem.InUse(); got != 0 {
			t.Errorf("%d bytes still charged after the listing was used", got)
		}
	})
}

func keptBytes(c *Cache) int64 {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	return c.keptBytes
}

// The listings kept between polls stay within MaxListingsBytes: the least recently used
// are dropped (and listed again when next needed), the newest is always kept, and a
// replaced listing stops counting.
func TestCache_Keep_DropsLeastRecentlyUsedListings(t *testing.T) {
	c := NewCacheWithLimits(t.TempDir(), CacheLimits{MaxListingsBytes: 250})
	remotes := map[string]*remote{}
	listed := func(name string, size int64, used int64) *listing {
		rm, ok := remotes[name]
		if !ok {
			rm = &remote{c: c}
			remotes[name] = rm
		}
		l := &listing{size: size}
		l.used.Store(used)
		rm.mu.Lock()
		old := rm.listing
		rm.listing = l
		rm.mu.Unlock()
		c.keep(rm, old, l)
		return l
	}
	kept := func() []string {
		var out []string
		for _, name := range []string{"a", "b", "c", "d"} {
			if rm, ok := remotes[name]; ok && rm.currentListing() != nil {
				out = append(out, name)
			}
		}
		return out
	}
	listed("a", 100, 1)
	listed("b", 100, 3)
	listed("a", 100, 4) // replaces a's first listing: 200 kept, not 300
	if diff := cmp.Diff([]string{"a", "b"}, kept()); diff != "" || keptBytes(c) != 200 {
		t.Errorf("kept (-want +got):\n%s; %d bytes", diff, keptBytes(c))
	}
	listed("c", 100, 5) // over 250: b, used least recently, goes
	if diff := cmp.Diff([]string{"a", "c"}, kept()); diff != "" || keptBytes(c) != 200 {
		t.Errorf("kept (-want +got):\n%s; %d bytes", diff, keptBytes(c))
	}
	listed("d", 1000, 6) // larger than the limit alone: kept, every other one dropped
	if diff := cmp.Diff([]string{"d"}, kept()); diff != "" || keptBytes(c) != 1000 {
		t.Errorf("kept (-want +got):\n%s; %d bytes", diff, keptBytes(c))
	}
}

// The whole cache stays within MaxCacheBytes: a fetch that could pass it first removes
// the repositories no resolve is using, least recently used first; a repository removed
// is fetched again when needed.
func TestResolver_Resolve_GlobalCacheCapEvictsUnusedRepositories(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"big1", "big2"} {
		gitserver.NewRepo(t, root, name, bigFiles(t, 1<<20))
	}
	s := gitserver.NewHTTPServer(t, root, nil)
	f := newFixture(t)
	f.withLimits(CacheLimits{MaxFetchBytes: 2 << 20, MaxCacheBytes: 5 << 19})
	resolve := func(ns, repo string) error {
		stack := newStack("app-"+repo, pulumiv1.GitSource{ProjectRepo: s.URL + "/" + repo + ".git", Branch: "main", RepoDir: "infra/app"})
		stack.Namespace = ns
		_, err := f.resolver.Resolve(ctx(t), stack)
		return err
	}
	cached := func() int {
		c := f.resolver.Cache
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.remotes)
	}
	if err := resolve("a", "big1"); err != nil {
		t.Fatal(err)
	}
	// big1 (over 1 MiB) and a fetch of up to 2 MiB could pass 2.5 MiB: big1 goes first.
	if err := resolve("b", "big2"); err != nil {
		t.Fatal(err)
	}
	if got := cached(); got != 1 {
		t.Errorf("%d repositories cached after the second fetch; want 1 (the first evicted to make room)", got)
	}
	fetches := s.Counts()[1]
	if err := resolve("a", "big1"); err != nil {
		t.Fatal(err)
	}
	if s.Counts()[1] == fetches {
		t.Error("the evicted repository was served without a fetch")
	}
}

// A repository a resolve is using is never removed to make room: the fetch is refused
// instead, as something to retry, naming the cap.
func TestCache_Admit_RefusesWhenOnlyRepositoriesInUseFill(t *testing.T) {
	dir := t.TempDir()
	c := NewCacheWithLimits(dir, CacheLimits{MaxFetchBytes: 1 << 20, MaxCacheBytes: 2 << 20})
	for id, users := range map[string]int{"busy": 1, "idle": 0} {
		rm := &remote{c: c, dir: filepath.Join(dir, id), namespaces: map[string]time.Time{}, users: users}
		if err := os.MkdirAll(rm.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		rm.size.Store(2 << 20)
		c.remotes[id] = rm
	}
	err := c.admit("a", "https://example.com/x.git")
	wantFault(t, err, pulumiv1.ReasonSourceUnavailable, false, []string{"the git cache holds 2 MiB of repositories in use", "--" + FlagMaxCacheBytes}, nil)
	if _, ok := c.remotes["busy"]; !ok {
		t.Error("the repository in use was removed")
	}
	if _, err := os.Stat(filepath.Join(dir, "idle")); !os.IsNotExist(err) {
		t.Errorf("the idle repository was kept: %v", err)
	}
}

// A namespace whose Stacks use their share of the artifact store is refused the artifact of
// a new commit, as something to retry naming the flag, while a commit already stored is
// still served to it and another namespace still gets new ones.
func TestResolver_Resolve_NamespaceArtifactShare(t *testing.T) {
	root := t.TempDir()
	repo, first := gitserver.NewRepo(t, root, "infra", projectFiles1)
	s := gitserver.NewHTTPServer(t, root, nil)
	f := newFixture(t)
	f.store.SetNamespaceLimit(1, time.Hour)
	stack := func(ns string, commit string) *pulumiv1.Stack {
		st := newStack("app", pulumiv1.GitSource{ProjectRepo: s.URL + "/infra.git", Commit: commit, RepoDir: "infra/app"})
		st.Namespace = ns
		return st
	}
	a := f.resolve(t, stack("team-a", first))
	f.store.Attribute("team-a", a.Digest) // what the Stack controller does with the artifact
	second := repo.Commit(map[string]string{"infra/app/main.txt": "v2"})

	_, err := f.resolver.Resolve(ctx(t), stack("team-a", second))
	wantFault(t, err, pulumiv1.ReasonSourceUnavailable, false, []string{`namespace "team-a"`, "--" + artifact.FlagMaxNamespaceBytes}, nil)
	if again := f.resolve(t, stack("team-a", first)); again.Digest != a.Digest {
		t.Errorf("the stored commit's artifact = %s; want %s", again.Digest, a.Digest)
	}
	f.resolve(t, stack("team-b", second))
}
