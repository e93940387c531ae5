package git

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"golang.org/x/sync/singleflight"
	ctrl "sigs.k8s.io/controller-runtime"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/fault"
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
type Cache struct {
	dir string

	mu      sync.Mutex
	key     []byte // HMAC key; nil until loaded
	remotes map[string]*remote
}

// NewCache returns the cache rooted at dir. The directory is created on first use.
func NewCache(dir string) *Cache {
	return &Cache{dir: dir, remotes: map[string]*remote{}}
}

// remote returns the shared state of one (URL, credentials) pair, creating it on first
// use. Credentials that cannot be turned into an auth method are reported and not
// remembered, so a corrected Secret is picked up at once.
func (c *Cache) remote(rawURL string, cred *credentials) (*remote, error) {
	ep, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key == nil {
		if c.key, err = loadKey(c.dir); err != nil {
			return nil, err
		}
	}
	id := identity(c.key, rawURL, cred)
	if rm, ok := c.remotes[id]; ok {
		return rm, nil
	}
	tmp := filepath.Join(c.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create git cache directory: %w", err)
	}
	auth, err := authFor(ep, cred, tmp)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.dir, id)
	rm := &remote{
		url:     redactURL(rawURL),
		ep:      ep,
		auth:    auth,
		cred:    cred,
		full:    &repo{dir: filepath.Join(dir, "full")},
		shallow: &repo{dir: filepath.Join(dir, "shallow"), shallow: true},
		digests: map[plumbing.Hash]string{},
		checked: map[dirCheck]error{},
	}
	c.remotes[id] = rm
	return rm, nil
}

// loadKey reads the cache's HMAC key, creating it on first use. It lives with the
// repositories it names: losing it only means fetching again.
func loadKey(dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create git cache directory: %w", err)
	}
	path := filepath.Join(dir, "identity.key")
	key, err := os.ReadFile(path)
	if err == nil && len(key) == 32 {
		return key, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("failed to read git cache key: %w", err)
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("failed to generate git cache key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "identity.key-*")
	if err != nil {
		return nil, fmt.Errorf("failed to write git cache key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(key); err != nil {
		_ = tmp.Close()
		return nil, fmt.Errorf("failed to write git cache key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("failed to write git cache key: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, fmt.Errorf("failed to write git cache key: %w", err)
	}
	return key, nil
}

// identity names a (URL, credentials) pair. Fields are length-prefixed so that no two
// different pairs encode alike.
func identity(key []byte, rawURL string, cred *credentials) string {
	m := hmac.New(sha256.New, key)
	for _, f := range [][]byte{
		[]byte(rawURL), {byte(cred.method)}, []byte(cred.username), []byte(cred.password),
		cred.privateKey, []byte(cred.passphrase), cred.knownHosts,
	} {
		var n [binary.MaxVarintLen64]byte
		m.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		m.Write(f)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// remote is everything shared by the Stacks that use one repository URL with the same
// credentials.
type remote struct {
	url     string // for messages and logs, without any password
	ep      *transport.Endpoint
	auth    transport.AuthMethod
	cred    *credentials
	full    *repo
	shallow *repo

	// lists runs at most one ref listing at a time; fetches and packs at most one fetch
	// and one packing per commit; checks one project check per (commit, repoDir).
	lists, fetches, packs, checks singleflight.Group

	mu      sync.Mutex
	listing *listing
	digests map[plumbing.Hash]string // commit -> artifact digest
	checked map[dirCheck]error       // (commit, repoDir) -> nil or the permanent fault
}

type dirCheck struct {
	commit plumbing.Hash
	dir    string
}

// listing is the outcome of one ref listing (ls-remote).
type listing struct {
	at   time.Time
	refs map[plumbing.ReferenceName]plumbing.Hash
	err  error
}

// fresh reports whether l may answer a caller polling every interval. Any caller's
// interval is honoured: a Stack polling every 10 s refreshes the listing for one polling
// every minute, never the other way round.
func (l *listing) fresh(now time.Time, interval time.Duration) bool {
	if l == nil {
		return false
	}
	if l.err != nil {
		interval = min(interval, failedListingTTL)
	}
	age := now.Sub(l.at)
	return age >= 0 && age < interval
}

func (rm *remote) currentListing() *listing {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return rm.listing
}

// head returns the commit ref points at, from a listing no older than interval. Concurrent
// callers share one listing; the caller whose call lists also fetches its head in the same
// session when it is missing (see list).
func (rm *remote) head(ctx context.Context, ref plumbing.ReferenceName, shallow bool, interval time.Duration, now func() time.Time) (plumbing.Hash, error) {
	l := rm.currentListing()
	if !l.fresh(now(), interval) {
		var err error
		l, err = await(ctx, &rm.lists, "", listTimeout+fetchTimeout, func(ctx context.Context) (*listing, error) {
			// Another caller may have listed between our check and this call.
			if l := rm.currentListing(); l.fresh(now(), interval) {
				return l, nil
			}
			return rm.list(ctx, now(), ref, shallow), nil
		})
		if err != nil {
			return plumbing.ZeroHash, err
		}
	}
	if l.err != nil {
		return plumbing.ZeroHash, l.err
	}
	h, ok := l.refs[ref]
	if !ok {
		return plumbing.ZeroHash, fault.Retry(pulumiv1.ReasonSourceUnavailable, "branch %q not found in %s", ref.Short(), rm.url)
	}
	return h, nil
}

// list lists the remote's refs and records the listing for everyone. When the caller's
// head is not in the cache yet, it is fetched on the same session: over smart HTTP that
// saves the second ref advertisement a separate fetch starts with, over SSH a second
// connection, and the wanted commit is one the server has just advertised, which every
// server accepts.
func (rm *remote) list(ctx context.Context, at time.Time, ref plumbing.ReferenceName, shallow bool) *listing {
	log := ctrl.LoggerFrom(ctx).WithValues("repo", rm.url)
	l := &listing{at: at}
	sess, ar, err := rm.advertise(ctx)
	if err != nil {
		l.err = rm.fault("list the refs of", err)
		log.V(1).Info("Git ref listing failed", "error", l.err.Error())
	} else {
		defer sess.Close()
		l.refs = advertised(ar)
		log.V(1).Info("Listed git refs", "refs", len(l.refs))
	}
	if h, ok := l.refs[ref]; ok && rm.holder(h) == nil {
		// A failure here is not the listing's: the caller finds the commit missing and
		// fetches it on its own, reporting that error.
		_, _, _ = rm.fetches.Do(h.String(), func() (any, error) {
			if rm.holder(h) != nil {
				return nil, nil
			}
			return nil, rm.fetchCommit(ctx, sess, ar, h, ref, shallow)
		})
	}
	// Published only now, so that a caller arriving during the fetch joins this call
	// rather than seeing a fresh listing and starting a fetch (and a listing) of its own.
	rm.mu.Lock()
	rm.listing = l
	rm.mu.Unlock()
	return l
}

// ensure makes commit h present in the cache, fetching it when needed. ref is the branch
// it was listed for ("" for a pinned commit).
func (rm *remote) ensure(ctx context.Context, h plumbing.Hash, ref plumbing.ReferenceName, shallow bool) error {
	if rm.holder(h) != nil {
		return nil
	}
	_, err := await(ctx, &rm.fetches, h.String(), listTimeout+fetchTimeout, func(ctx context.Context) (struct{}, error) {
		if rm.holder(h) != nil {
			return struct{}{}, nil
		}
		sess, ar, err := rm.advertise(ctx)
		if err != nil {
			return struct{}{}, rm.fault("fetch from", err)
		}
		defer sess.Close()
		return struct{}{}, rm.fetchCommit(ctx, sess, ar, h, ref, shallow)
	})
	return err
}

// advertise opens an upload-pack session and reads the server's refs.
func (rm *remote) advertise(ctx context.Context) (transport.UploadPackSession, *packp.AdvRefs, error) {
	tr, err := client.NewClient(rm.ep)
	if err != nil {
		return nil, nil, err
	}
	sess, err := tr.NewUploadPackSession(rm.ep, rm.auth)
	if err != nil {
		return nil, nil, err
	}
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		_ = sess.Close()
		return nil, nil, err
	}
	return sess, ar, nil
}

// fetchCommit fetches h on an open session. A commit the server advertised, or any commit
// when the server allows wanting reachable ones, is fetched alone (at depth 1 for shallow
// Stacks). Otherwise, which is what a pinned older commit meets on servers with
// git's default configuration, every branch is fetched with full history and h looked
// for among them.
func (rm *remote) fetchCommit(ctx context.Context, sess transport.UploadPackSession, ar *packp.AdvRefs, h plumbing.Hash, ref plumbing.ReferenceName, shallow bool) error {
	log := ctrl.LoggerFrom(ctx).WithValues("repo", rm.url, "commit", h.String())
	refs := advertised(ar)
	// An annotated tag is advertised as the tag object, which is what may be asked for;
	// the commit comes with it.
	want, tip := h, false
	for name, v := range ar.References {
		if v == h {
			tip = true
		}
		if p, ok := ar.Peeled[name]; ok && p == h {
			want, tip = v, true
		}
	}
	var err error
	if tip || ar.Capabilities.Supports(capability.AllowReachableSHA1InWant) {
		rp := rm.full
		if shallow && ar.Capabilities.Supports(capability.Shallow) {
			rp = rm.shallow
		}
		keep := map[plumbing.ReferenceName]plumbing.Hash{}
		if ref != "" {
			keep[ref] = h
		} else {
			keep[plumbing.ReferenceName("refs/pinned/"+h.String())] = h
		}
		log.Info("Fetching git commit", "shallow", rp.shallow)
		err = rp.fetch(ctx, sess, ar, []plumbing.Hash{want}, keep)
	} else {
		heads := map[plumbing.ReferenceName]plumbing.Hash{}
		var wants []plumbing.Hash
		for name, v := range refs {
			if name.IsBranch() {
				heads[name] = v
				wants = append(wants, v)
			}
		}
		log.Info("Fetching every git branch to find a commit the server does not let us ask for", "branches", len(heads))
		err = rm.full.fetch(ctx, sess, ar, wants, heads)
	}
	if err != nil {
		return rm.fault("fetch commit "+h.String()+" from", err)
	}
	if rm.holder(h) == nil {
		return fault.Retry(pulumiv1.ReasonSourceUnavailable, "commit %s not found in any branch of %s", h, rm.url)
	}
	return nil
}

// holder returns the repository that has commit h, or nil.
func (rm *remote) holder(h plumbing.Hash) *repo {
	for _, rp := range []*repo{rm.full, rm.shallow} {
		if rp.hasCommit(h) {
			return rp
		}
	}
	return nil
}

// memoised returns the artifact of (h, dir) when both were already established.
func (rm *remote) memoised(h plumbing.Hash, dir string, store *artifact.Store) (string, bool) {
	rm.mu.Lock()
	d, packed := rm.digests[h]
	checkErr, checked := rm.checked[dirCheck{h, dir}]
	rm.mu.Unlock()
	return d, packed && checked && checkErr == nil && store.Has(d)
}

// artifact returns the digest of the tarball of commit h (which must be present), after
// checking that dir holds a Pulumi project at h. Both results are remembered: a commit
// never changes.
func (rm *remote) artifact(ctx context.Context, h plumbing.Hash, dir string, store *artifact.Store, lim artifact.Limits) (string, error) {
	if err := rm.checkProject(ctx, h, dir); err != nil {
		return "", err
	}
	return await(ctx, &rm.packs, h.String(), packTimeout, func(ctx context.Context) (string, error) {
		rm.mu.Lock()
		d, ok := rm.digests[h]
		rm.mu.Unlock()
		if ok && store.Has(d) {
			return d, nil
		}
		rp := rm.holder(h)
		if rp == nil {
			return "", fmt.Errorf("failed to read commit %s: not in the cache", h)
		}
		files, skipped, err := rp.files(h, lim)
		if err != nil {
			return "", err
		}
		tarball, err := artifact.Pack(files)
		if err != nil {
			return "", fault.Stall(pulumiv1.ReasonInvalidSpec, "commit %s of %s cannot be packed: %v", h, rm.url, err)
		}
		d, err = store.Put(bytes.NewReader(tarball), lim.MaxBytes)
		if errors.Is(err, artifact.ErrTooLarge) {
			return "", fault.Stall(pulumiv1.ReasonInvalidSpec, "commit %s of %s packs into more than the %d bytes an artifact may have", h, rm.url, lim.MaxBytes)
		}
		if err != nil {
			return "", fmt.Errorf("failed to store artifact of commit %s: %w", h, err)
		}
		ctrl.LoggerFrom(ctx).Info("Packed git commit", "repo", rm.url, "commit", h.String(), "files", len(files), "skipped", skipped, "digest", d)
		rm.mu.Lock()
		if len(rm.digests) >= maxMemo {
			clear(rm.digests)
		}
		rm.digests[h] = d
		rm.mu.Unlock()
		return d, nil
	})
}

// checkProject checks, once per (commit, repoDir), that dir holds a Pulumi project at h.
func (rm *remote) checkProject(ctx context.Context, h plumbing.Hash, dir string) error {
	key := dirCheck{h, dir}
	rm.mu.Lock()
	checkErr, checked := rm.checked[key]
	rm.mu.Unlock()
	if checked {
		return checkErr
	}
	_, err := await(ctx, &rm.checks, h.String()+"\x00"+dir, packTimeout, func(context.Context) (struct{}, error) {
		rp := rm.holder(h)
		if rp == nil {
			return struct{}{}, fmt.Errorf("failed to read commit %s: not in the cache", h)
		}
		err := rp.checkProject(h, dir)
		// Only verdicts about the commit are kept; a failure to read it is not one.
		if f, ok := fault.As(err); err == nil || ok && f.Stalled {
			rm.mu.Lock()
			if len(rm.checked) >= maxMemo {
				clear(rm.checked)
			}
			rm.checked[key] = err
			rm.mu.Unlock()
		}
		return struct{}{}, err
	})
	return err
}

// repo is one bare repository of the cache. go-git's filesystem storage does not promise
// safe concurrent use, so every access holds mu; a fetch holds it while the pack streams
// in, which only delays other work on the same repository.
type repo struct {
	dir     string
	shallow bool

	mu sync.Mutex
}

// errNoRepo: the repository has not been created yet.
var errNoRepo = errors.New("no such cache repository")

// open returns a storage handle for one operation; the caller holds mu and closes it.
// Handles are not kept between operations: each holds go-git's object cache and the pack
// indexes it read, which would otherwise stay in memory for every repository ever used.
// Without create, a repository that does not exist yet is errNoRepo. A directory without
// HEAD is what an interrupted creation leaves, so it is started afresh.
func (rp *repo) open(create bool) (*filesystem.Storage, error) {
	_, err := os.Stat(filepath.Join(rp.dir, "HEAD"))
	exists := err == nil
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("failed to open git cache repository: %w", err)
	case !exists && !create:
		return nil, errNoRepo
	case !exists:
		if err := os.RemoveAll(rp.dir); err != nil {
			return nil, fmt.Errorf("failed to reset git cache repository: %w", err)
		}
		if err := os.MkdirAll(rp.dir, 0o700); err != nil {
			return nil, fmt.Errorf("failed to create git cache repository: %w", err)
		}
	}
	st := filesystem.NewStorageWithOptions(osfs.New(rp.dir), cache.NewObjectLRU(objectCacheBytes), filesystem.Options{ExclusiveAccess: true})
	if !exists {
		if _, err := gogit.Init(st, nil); err != nil {
			_ = st.Close()
			return nil, fmt.Errorf("failed to create git cache repository: %w", err)
		}
	}
	return st, nil
}

// hasCommit reports whether commit h is stored. It never creates the repository.
func (rp *repo) hasCommit(h plumbing.Hash) bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	st, err := rp.open(false)
	if err != nil {
		return false
	}
	defer st.Close()
	return isCommit(st, h)
}

func isCommit(st *filesystem.Storage, h plumbing.Hash) bool {
	_, err := st.EncodedObject(plumbing.CommitObject, h)
	return err == nil
}

// fetch asks the server, on an open session, for wants (skipping those already present)
// and records keep as local refs, which later fetches offer as haves so that only new
// objects travel.
func (rp *repo) fetch(ctx context.Context, sess transport.UploadPackSession, ar *packp.AdvRefs, wants []plumbing.Hash, keep map[plumbing.ReferenceName]plumbing.Hash) (err error) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	st, err := rp.open(true)
	if err != nil {
		return err
	}
	defer st.Close()
	var need []plumbing.Hash
	for _, w := range wants {
		if !isCommit(st, w) && !containsHash(need, w) {
			need = append(need, w)
		}
	}
	if len(need) > 0 {
		if err := rp.download(ctx, st, sess, ar, need); err != nil {
			return err
		}
	}
	for name, h := range keep {
		if !isCommit(st, h) {
			continue
		}
		if err := st.SetReference(plumbing.NewHashReference(name, h)); err != nil {
			return fmt.Errorf("failed to record ref %s: %w", name, err)
		}
	}
	return nil
}

func (rp *repo) download(ctx context.Context, st *filesystem.Storage, sess transport.UploadPackSession, ar *packp.AdvRefs, need []plumbing.Hash) (err error) {
	req := packp.NewUploadPackRequestFromCapabilities(ar.Capabilities)
	if ar.Capabilities.Supports(capability.NoProgress) {
		if err := req.Capabilities.Set(capability.NoProgress); err != nil {
			return err
		}
	}
	if rp.shallow {
		// Depth 1 on every fetch, and the current boundary, so the server knows which
		// history we lack.
		if err := req.Capabilities.Set(capability.Shallow); err != nil {
			return err
		}
		req.Depth = packp.DepthCommits(1)
		if req.Shallows, err = st.Shallow(); err != nil {
			return fmt.Errorf("failed to read shallow commits: %w", err)
		}
	}
	req.Wants = need
	if req.Haves, err = haves(st); err != nil {
		return err
	}
	resp, err := sess.UploadPack(ctx, req)
	if errors.Is(err, transport.ErrEmptyUploadPackRequest) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() {
		if cerr := resp.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if rp.shallow {
		if err := updateShallow(st, resp.Shallows, resp.Unshallows); err != nil {
			return err
		}
	}
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		return packfile.UpdateObjectStorage(st, sideband.NewDemuxer(sideband.Sideband64k, resp))
	case req.Capabilities.Supports(capability.Sideband):
		return packfile.UpdateObjectStorage(st, sideband.NewDemuxer(sideband.Sideband, resp))
	}
	return packfile.UpdateObjectStorage(st, resp)
}

// haves lists the commits our refs point at.
func haves(st *filesystem.Storage) ([]plumbing.Hash, error) {
	it, err := st.IterReferences()
	if err != nil {
		return nil, fmt.Errorf("failed to list local refs: %w", err)
	}
	var out []plumbing.Hash
	err = it.ForEach(func(r *plumbing.Reference) error {
		if len(out) >= maxHaves {
			return storer.ErrStop
		}
		if r.Type() == plumbing.HashReference && !containsHash(out, r.Hash()) && isCommit(st, r.Hash()) {
			out = append(out, r.Hash())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to list local refs: %w", err)
	}
	return out, nil
}

func updateShallow(st *filesystem.Storage, add, remove []plumbing.Hash) error {
	cur, err := st.Shallow()
	if err != nil {
		return fmt.Errorf("failed to read shallow commits: %w", err)
	}
	var next []plumbing.Hash
	for _, h := range append(cur, add...) {
		if !containsHash(remove, h) && !containsHash(next, h) {
			next = append(next, h)
		}
	}
	if err := st.SetShallow(next); err != nil {
		return fmt.Errorf("failed to record shallow commits: %w", err)
	}
	return nil
}

// advertised returns the refs of an advertisement, annotated tags peeled to the commit
// they name.
func advertised(ar *packp.AdvRefs) map[plumbing.ReferenceName]plumbing.Hash {
	out := make(map[plumbing.ReferenceName]plumbing.Hash, len(ar.References))
	for name, h := range ar.References {
		if p, ok := ar.Peeled[name]; ok {
			h = p
		}
		out[plumbing.ReferenceName(name)] = h
	}
	if ar.Head != nil {
		out[plumbing.HEAD] = *ar.Head
	}
	return out
}

func containsHash(hs []plumbing.Hash, h plumbing.Hash) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

// await runs fn once for all concurrent callers with the same key. fn gets a context that
// no single caller can cancel (others may still be waiting for the result), bounded by
// timeout; a caller whose own context ends stops waiting without stopping fn.
func await[T any](ctx context.Context, g *singleflight.Group, key string, timeout time.Duration, fn func(context.Context) (T, error)) (T, error) {
	ch := g.DoChan(key, func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		return fn(fctx)
	})
	select {
	case res := <-ch:
		v, _ := res.Val.(T)
		return v, res.Err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
