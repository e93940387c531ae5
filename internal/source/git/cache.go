package git

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/keyfile"
	"github.com/stackwright/stackwright/internal/source/git/githubapp"
)

const (
	// listTimeout bounds one ref listing, connection included.
	listTimeout = 2 * time.Minute
	// fetchTimeout bounds one fetch; large repositories on slow links need minutes.
	fetchTimeout = 15 * time.Minute
	// packTimeout bounds turning one commit into an artifact.
	packTimeout = 5 * time.Minute
	// failedListingTTL is how long a failed listing is served to other Stacks before the
	// server is asked again: long enough that a fleet on a broken repository does not
	// hammer it, short enough that a server coming back is noticed quickly.
	failedListingTTL = 10 * time.Second
	// overrunTTL is how long a fetch that went over the fetch cap is answered from memory:
	// long enough that the Stacks (of any namespace) sharing a commit too large, and a
	// listing's fetch followed by its caller's, download it once; short enough that a
	// repository trimmed since is fetched again soon after its Stack is poked.
	overrunTTL = 10 * time.Minute
	// maxHaves bounds the commits offered to the server as already present.
	maxHaves = 256
	// maxMemo bounds the commits (and commit, repoDir pairs) remembered per remote. A
	// branch pushed to all day must not grow the manager without bound; forgetting costs
	// one re-check or re-pack, which the store deduplicates.
	maxMemo = 1024
	// objectCacheBytes is go-git's decoded-object cache per storage handle (one per
	// operation); it mostly serves delta bases while a tree is read.
	objectCacheBytes = 8 * cache.MiByte
)

// Cache is the fetch cache shared by every git Stack of a manager.
//
// On disk (dir is on the manager's data volume):
//
//	dir/identity.key         32 random bytes (0600), the HMAC key of remote identities
//	dir/tmp/                 short-lived files (known_hosts content being parsed)
//	dir/<identity>/full/     bare repository fetched with full history
//	dir/<identity>/shallow/  bare repository fetched at depth 1 (spec.shallow)
//
// <identity> is the hex HMAC-SHA256, under identity.key, of the repository URL and the
// credentials (including known_hosts). Credentials are part of it so that objects fetched
// with one Stack's credentials are never served to a Stack whose own could not fetch them,
// and a listing made with good credentials never hides that another Stack's are wrong. An
// HMAC rather than a plain hash, so that a directory name cannot confirm a guessed
// password offline. Nothing else of the credentials is written: the repositories have no
// remote configured; URLs and credentials stay in memory.
//
// Shallow and full histories live apart because one repository holding both would need
// every later fetch to negotiate the shallow boundary, which go-git only does for
// depth-limited fetches (a full fetch into a shallow repository can miss objects). An
// artifact needs just one tree, so a commit found in either serves every Stack.
//
// The directory is only a cache: deleting it while the manager is stopped loses nothing.
// Collect removes the repositories of remotes unused for a while (a remote directory's
// modification time is its last use).
//
// Every Stack author chooses what the cache downloads, so it is bounded (see
// CacheLimits): each fetch and HTTP ref listing in bytes, and each namespace in the disk
// its repositories take. A remote is shared by the namespaces whose Stacks use the same
// URL and credentials, and its whole size counts against each of them: split, one
// namespace's usage would grow, and its fetches be refused, because another stopped using
// a repository. A namespace is charged for the remotes its Stacks resolved within the
// collection's retention. That is known in memory only, so after a restart a namespace is
// charged for a repository again once one of its Stacks resolves it (all do when the
// manager starts); persisting it would cost a write per use for a window that short.
// Usage is checked before each fetch, so concurrent fetches for one namespace can take it
// past its cap by at most one fetch cap each.
type Cache struct {
	dir    string
	limits CacheLimits
	// http is the HTTP(S) transport, counting response bodies against the meter of each
	// request's context.
	http transport.Transport
	// tokens mints and keeps the installation tokens of GitHub App credentials.
	tokens *githubapp.Tokens

	mu      sync.Mutex
	key     []byte // HMAC key; nil until loaded
	remotes map[string]*remote

	// kept are the ref listings held between polls, with their remotes, and keptBytes
	// their estimated size (MaxListingsBytes). lmu is taken before any remote's mu.
	lmu       sync.Mutex
	kept      map[*listing]*remote
	keptBytes int64
}

// NewCacheWithLimits returns the cache rooted at dir, created on first use; zero limits are
// no limit.
func NewCacheWithLimits(dir string, limits CacheLimits) *Cache {
	c := &Cache{
		dir:     dir,
		limits:  limits,
		remotes: map[string]*remote{},
		kept:    map[*listing]*remote{},
	}
	c.UseTransport(http.DefaultTransport, nil)
	return c
}

// UseTransport makes the cache reach HTTP(S) git servers and GitHub's API through base
// (http.DefaultTransport unless called), and age GitHub App tokens by clock now (nil:
// time.Now). Tests use it to trust their own servers' certificates and to move time;
// call it before the first resolve.
func (c *Cache) UseTransport(base http.RoundTripper, now func() time.Time) {
	c.http = githttp.NewClient(&http.Client{Transport: meteredTransport{base: base}})
	c.tokens = githubapp.New(githubapp.Options{Transport: base, Now: now})
}

// remote returns the shared state of one (URL, credentials) pair, creating it on first
// use, charges it to namespace ns, and marks it in use until release is called: Collect
// never removes a remote in use. Credentials that cannot be turned into an auth method
// are reported and not remembered, so a corrected Secret is picked up at once.
func (c *Cache) remote(ns, rawURL string, cred *credentials) (rm *remote, release func(), err error) {
	ep, err := parseURL(rawURL)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key == nil {
		if c.key, err = loadKey(c.dir); err != nil {
			return nil, nil, err
		}
	}
	id := identity(c.key, rawURL, cred)
	rm, ok := c.remotes[id]
	if !ok {
		if rm, err = c.newRemote(id, rawURL, ep, cred); err != nil {
			return nil, nil, err
		}
		c.remotes[id] = rm
	}
	rm.users++
	rm.lastUsed = time.Now()
	rm.namespaces[ns] = rm.lastUsed
	c.markUsed(id, rm)
	return rm, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		rm.users--
	}, nil
}

// markUsed records a use in the remote directory's modification time, which outlives the
// process: Collect reads it, after a restart too. Called with c.mu held.
func (c *Cache) markUsed(id string, rm *remote) {
	now := time.Now()
	if now.Sub(rm.marked) < time.Minute {
		return
	}
	dir := filepath.Join(c.dir, id)
	if err := os.MkdirAll(dir, 0o700); err == nil && os.Chtimes(dir, now, now) == nil {
		rm.marked = now
	}
}

// Collect removes the repositories of every remote that no resolve has used for
// unusedFor, in use by none, including those left by an earlier run of the manager, and
// returns how many it removed. A remote needed again is fetched again. It also stops
// charging a namespace for the remotes its Stacks have not used for unusedFor.
func (c *Cache) Collect(unusedFor time.Duration) (int, error) {
	entries, err := os.ReadDir(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("failed to list git cache: %w", err)
	}
	cutoff := time.Now().Add(-unusedFor)
	// Holding the lock keeps a resolve from picking a remote up while its directory goes.
	c.mu.Lock()
	defer c.mu.Unlock()
	// A namespace stops paying for a repository as late as the repository would go if
	// it were the last to use it.
	for _, rm := range c.remotes {
		for ns, used := range rm.namespaces {
			if used.Before(cutoff) {
				delete(rm.namespaces, ns)
			}
		}
	}
	removed := 0
	for _, e := range entries {
		id := e.Name()
		if !e.IsDir() || !isIdentity(id) {
			continue
		}
		if rm, ok := c.remotes[id]; ok && rm.users > 0 {
			continue
		}
		fi, err := os.Stat(filepath.Join(c.dir, id))
		if err != nil || fi.ModTime().After(cutoff) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(c.dir, id)); err != nil {
			return removed, fmt.Errorf("failed to remove unused git repository: %w", err)
		}
		c.drop(id)
		removed++
	}
	return removed, nil
}

// usage returns the cache disk attributed to namespace ns. Called with c.mu held.
func (c *Cache) usage(ns string) int64 {
	var n int64
	for _, rm := range c.remotes {
		if _, ok := rm.namespaces[ns]; ok {
			n += rm.size.Load()
		}
	}
	return n
}

// admit refuses a fetch for namespace ns while its cache usage is at or over its cap, or
// while the whole cache could pass its own cap with this fetch and removing the
// repositories no resolve is using (least recently used first) does not make room.
// Either fault is retried: usage falls when repositories stop being used, with no change
// to the Stack that was refused.
func (c *Cache) admit(ns, url string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if limit := c.limits.MaxNamespaceBytes; limit > 0 {
		if used := c.usage(ns); used >= limit {
			return fault.Retry(pulumiv1.ReasonSourceUnavailable,
				"failed to fetch %s: the git cache holds %s of repositories that Stacks of namespace %q use, at or over the namespace's cap of %s (--%s); a repository no Stack of the namespace uses stops counting after the git cache retention",
				url, artifact.FormatBytes(used), ns, artifact.FormatBytes(limit), FlagMaxNamespaceBytes)
		}
	}
	limit := c.limits.MaxCacheBytes
	if limit <= 0 {
		return nil
	}
	need := limit - c.limits.MaxFetchBytes
	total := c.evictFor(need)
	if total > need {
		return fault.Retry(pulumiv1.ReasonSourceUnavailable,
			"failed to fetch %s: the git cache holds %s of repositories in use, and a fetch of up to %s (--%s) could take it past its cap of %s (--%s); retrying as repositories fall out of use",
			url, artifact.FormatBytes(total), artifact.FormatBytes(c.limits.MaxFetchBytes), FlagMaxFetchBytes, artifact.FormatBytes(limit), FlagMaxCacheBytes)
	}
	return nil
}

// evictFor removes repositories no resolve is using, least recently used first, until the
// cache holds at most target bytes, and returns what it then holds. Called with c.mu held,
// which keeps a resolve from picking a remote up while its directory goes.
func (c *Cache) evictFor(target int64) int64 {
	var total int64
	for _, rm := range c.remotes {
		total += rm.size.Load()
	}
	for total > target {
		victim := ""
		for id, rm := range c.remotes {
			if rm.users == 0 && (victim == "" || rm.lastUsed.Before(c.remotes[victim].lastUsed)) {
				victim = id
			}
		}
		if victim == "" {
			break
		}
		rm := c.remotes[victim]
		if err := os.RemoveAll(rm.dir); err != nil {
			break
		}
		total -= rm.size.Load()
		c.drop(victim)
	}
	return total
}

// drop forgets remote id and the listing it keeps. Called with c.mu held.
func (c *Cache) drop(id string) {
	rm, ok := c.remotes[id]
	if !ok {
		return
	}
	delete(c.remotes, id)
	c.lmu.Lock()
	defer c.lmu.Unlock()
	for l, owner := range c.kept {
		if owner == rm {
			delete(c.kept, l)
			c.keptBytes -= l.size
		}
	}
}

// keep records l as rm's listing in place of old, and drops the least recently used other
// listings while the kept ones are over MaxListingsBytes: each is listed again when next
// needed. The newest is always kept.
func (c *Cache) keep(rm *remote, old, l *listing) {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if _, ok := c.kept[old]; ok && old != nil {
		delete(c.kept, old)
		c.keptBytes -= old.size
	}
	c.kept[l] = rm
	c.keptBytes += l.size
	for limit := c.limits.MaxListingsBytes; limit > 0 && c.keptBytes > limit; {
		var victim *listing
		for k := range c.kept {
			if k != l && (victim == nil || k.used.Load() < victim.used.Load()) {
				victim = k
			}
		}
		if victim == nil {
			return
		}
		owner := c.kept[victim]
		delete(c.kept, victim)
		c.keptBytes -= victim.size
		owner.mu.Lock()
		if owner.listing == victim {
			owner.listing = nil
		}
		owner.mu.Unlock()
	}
}

// isIdentity reports whether name is a remote's directory (hex HMAC-SHA256), not the key
// or tmp.
func isIdentity(name string) bool {
	if len(name) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil
}

func (c *Cache) newRemote(id, rawURL string, ep *transport.Endpoint, cred *credentials) (*remote, error) {
	tmp := filepath.Join(c.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create git cache directory: %w", err)
	}
	auth, err := authFor(ep, cred, tmp)
	if err != nil {
		return nil, err
	}
	var app githubapp.Credentials
	if cred.method == authGitHubApp {
		api, err := githubapp.APIURL(rawURL)
		if err != nil {
			return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.projectRepo %q: %v", redactURL(rawURL), err)
		}
		app = githubapp.Credentials{APIURL: api, AppID: cred.appID, InstallationID: cred.installationID, PrivateKey: cred.privateKey}
	}
	dir := filepath.Join(c.dir, id)
	rm := &remote{
		app:        app,
		c:          c,
		dir:        dir,
		url:        redactURL(rawURL),
		ep:         ep,
		auth:       auth,
		cred:       cred,
		full:       &repo{dir: filepath.Join(dir, "full")},
		shallow:    &repo{dir: filepath.Join(dir, "shallow"), shallow: true},
		namespaces: map[string]time.Time{},
		digests:    map[plumbing.Hash]string{},
		checked:    map[dirCheck]error{},
		projects:   map[plumbing.Hash][]string{},
		overran:    map[fetchKey]overrun{},
	}
	// A repository an earlier run of the manager fetched counts from its first use.
	rm.size.Store(dirSize(dir))
	return rm, nil
}

// loadKey reads the cache's HMAC key, creating it on first use. It lives with the
// repositories it names: losing it only means fetching again.
func loadKey(dir string) ([]byte, error) {
	key, err := keyfile.Load(filepath.Join(dir, "identity.key"))
	if err != nil {
		return nil, fmt.Errorf("failed to load git cache key: %w", err)
	}
	return key, nil
}

// identity names a (URL, credentials) pair. Fields are length-prefixed so that no two
// different pairs encode alike. A GitHub App is named by its app, installation and key,
// not by the token of the moment: its remote lives across token rotations.
func identity(key []byte, rawURL string, cred *credentials) string {
	m := hmac.New(sha256.New, key)
	fields := [][]byte{
		[]byte(rawURL), {byte(cred.method)}, []byte(cred.username), []byte(cred.password),
		cred.privateKey, []byte(cred.passphrase), cred.knownHosts,
	}
	if cred.method == authGitHubApp {
		// Only then, so that the identities (and cache directories) of the other methods
		// stay what earlier versions named them.
		fields = append(fields, strconv.AppendInt(nil, cred.appID, 10), strconv.AppendInt(nil, cred.installationID, 10))
	}
	for _, f := range fields {
		var n [binary.MaxVarintLen64]byte
		m.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		m.Write(f)
	}
	return hex.EncodeToString(m.Sum(nil))
}
