package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"golang.org/x/sync/singleflight"
	ctrl "sigs.k8s.io/controller-runtime"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/source/git/githubapp"
)

// remote is everything shared by the Stacks that use one repository URL with the same
// credentials.
type remote struct {
	c    *Cache
	dir  string // holds full and shallow
	url  string // for messages and logs, without any password
	ep   *transport.Endpoint
	auth transport.AuthMethod
	cred *credentials
	// app is the GitHub App installation of authGitHubApp credentials, without the
	// namespace: each namespace's resolves mint their own tokens.
	app     githubapp.Credentials
	full    *repo
	shallow *repo

	// lists runs at most one ref listing at a time; fetches and packs at most one fetch
	// and one packing per commit; checks one project check per (commit, repoDir).
	lists, fetches, packs, checks singleflight.Group

	// users counts the resolves using the remote, marked is when its use was last
	// recorded on disk and namespaces when each namespace last used it; all are guarded
	// by the Cache's mutex.
	users      int
	marked     time.Time
	lastUsed   time.Time
	namespaces map[string]time.Time

	// size is the bytes of dir, measured when the remote is created and after each fetch.
	size atomic.Int64

	mu      sync.Mutex
	listing *listing
	// pokes counts the push notifications that named the repository (Cache.Poke); a
	// listing begun before the last of them is stale.
	pokes    uint64
	digests  map[plumbing.Hash]string   // commit -> artifact digest
	checked  map[dirCheck]error         // (commit, repoDir) -> nil or the permanent fault
	projects map[plumbing.Hash][]string // commit -> its Pulumi project directories
	// overran remembers the fetches that went over the fetch cap, for overrunTTL.
	overran map[fetchKey]overrun

	// tokens are the last GitHub App tokens sessions used, scrubbed from messages with
	// the other credentials; guarded by tmu.
	tmu    sync.Mutex
	tokens [2]string
}

type dirCheck struct {
	commit plumbing.Hash
	dir    string
}

type fetchKey struct {
	commit  plumbing.Hash
	shallow bool
}

type overrun struct {
	at  time.Time
	err error
}

// listing is the outcome of one ref listing (ls-remote).
type listing struct {
	at time.Time
	// pokes is the remote's poke count when the listing began.
	pokes uint64
	refs  map[plumbing.ReferenceName]plumbing.Hash
	err   error
	// size estimates what refs holds in memory; used is when a caller last read it (unix
	// nanoseconds), for the Cache's least-recently-used choice.
	size int64
	used atomic.Int64
}

// refOverhead estimates one listed ref's memory: its name, its hash and a map entry.
const refOverhead = 80

func listingSize(refs map[plumbing.ReferenceName]plumbing.Hash) int64 {
	var n int64
	for name := range refs {
		n += int64(len(name)) + refOverhead
	}
	return n
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

// pokedSince reports whether the repository was poked after l was begun.
func (rm *remote) pokedSince(l *listing) bool {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return l != nil && l.pokes < rm.pokes
}

// pokeCount is the number of pokes so far, recorded by a listing as it begins.
func (rm *remote) pokeCount() uint64 {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return rm.pokes
}

// usable reports whether l may answer a caller polling every interval.
func (rm *remote) usable(l *listing, now time.Time, interval time.Duration) bool {
	return l.fresh(now, interval) && !rm.pokedSince(l)
}

// head returns the commit ref points at, from a listing no older than interval. Concurrent
// callers share one listing; the caller whose call lists also fetches its head in the same
// session when it is missing (see list), if its namespace ns may fetch.
func (rm *remote) head(ctx context.Context, ns string, ref plumbing.ReferenceName, shallow bool, interval time.Duration, now func() time.Time) (plumbing.Hash, error) {
	l, err := rm.listed(ctx, ns, interval, now, ref, shallow)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	h, ok := l.refs[ref]
	if !ok {
		return plumbing.ZeroHash, fault.Retry(pulumiv1.ReasonSourceUnavailable, "branch %q not found in %s", ref.Short(), rm.url)
	}
	return h, nil
}

// listed returns a listing no older than interval, listing anew (and fetching ref's head,
// see list) when the last is older.
func (rm *remote) listed(ctx context.Context, ns string, interval time.Duration, now func() time.Time, ref plumbing.ReferenceName, shallow bool) (*listing, error) {
	l := rm.currentListing()
	// A second round only when a poke arrived while the first listing was under way: the
	// caller joined a listing that may predate the push it was poked for.
	for round := 0; round < 2 && (round == 0 || rm.pokedSince(l)) && !rm.usable(l, now(), interval); round++ {
		var err error
		l, err = await(ctx, &rm.lists, "", listTimeout+fetchTimeout, func(ctx context.Context) (*listing, error) {
			// Another caller may have listed between our check and this call.
			if l := rm.currentListing(); rm.usable(l, now(), interval) {
				return l, nil
			}
			return rm.list(ctx, ns, now(), ref, shallow), nil
		})
		if err != nil {
			return nil, err
		}
	}
	l.used.Store(now().UnixNano())
	return l, l.err
}

// list lists the remote's refs and records the listing for everyone. When the caller's
// head is not in the cache yet, it is fetched on the same session: over smart HTTP that
// saves the second ref advertisement a separate fetch starts with, over SSH a second
// connection, and the wanted commit is one the server has just advertised, which every
// server accepts. Namespace ns is the caller's, whose cap the fetch is subject to.
func (rm *remote) list(ctx context.Context, ns string, at time.Time, ref plumbing.ReferenceName, shallow bool) *listing {
	log := ctrl.LoggerFrom(ctx).WithValues("repo", rm.url)
	l := &listing{at: at, pokes: rm.pokeCount()}
	sess, ar, err := rm.advertise(ctx, ns)
	if err != nil {
		l.err = rm.fault("list the refs of", err)
		log.V(1).Info("Git ref listing failed", "error", l.err.Error())
	} else {
		defer sess.Close()
		l.refs = advertised(ar)
		l.size = listingSize(l.refs)
		log.V(1).Info("Listed git refs", "refs", len(l.refs))
	}
	if h, ok := l.refs[ref]; ok && rm.holder(h) == nil && rm.overrun(h, shallow) == nil && rm.c.admit(ns, rm.url) == nil {
		// A failure here is not the listing's: the caller finds the commit missing and
		// fetches it on its own, reporting that error (a fetch over the cap is
		// remembered, not downloaded twice).
		_, _, _ = rm.fetches.Do(h.String(), func() (any, error) {
			if rm.holder(h) != nil {
				return nil, nil
			}
			return nil, rm.fetchCommit(ctx, sess, ar, h, ref, shallow)
		})
	}
	// Published only now, so that a caller arriving during the fetch joins this call
	// rather than seeing a fresh listing and starting a fetch (and a listing) of its own.
	l.used.Store(at.UnixNano())
	rm.mu.Lock()
	old := rm.listing
	rm.listing = l
	rm.mu.Unlock()
	rm.c.keep(rm, old, l)
	return l
}

// ensure makes commit h present in the cache, fetching it when needed and namespace ns
// is under its cap. ref is the branch it was listed for ("" for a pinned commit).
func (rm *remote) ensure(ctx context.Context, ns string, h plumbing.Hash, ref plumbing.ReferenceName, shallow bool) error {
	if rm.holder(h) != nil {
		return nil
	}
	if err := rm.overrun(h, shallow); err != nil {
		return err
	}
	if err := rm.c.admit(ns, rm.url); err != nil {
		return err
	}
	_, err := await(ctx, &rm.fetches, h.String(), listTimeout+fetchTimeout, func(ctx context.Context) (struct{}, error) {
		if rm.holder(h) != nil {
			return struct{}{}, nil
		}
		sess, ar, err := rm.advertise(ctx, ns)
		if err != nil {
			return struct{}{}, rm.fault("fetch from", err)
		}
		defer sess.Close()
		return struct{}{}, rm.fetchCommit(ctx, sess, ar, h, ref, shallow)
	})
	return err
}

// advertise opens an upload-pack session for namespace ns and reads the server's refs (see
// open). With a GitHub App, the session carries ns's current installation token; a cached
// token the server refuses (revoked, say) is replaced once by a fresh one.
func (rm *remote) advertise(ctx context.Context, ns string) (transport.UploadPackSession, *packp.AdvRefs, error) {
	if rm.cred.method != authGitHubApp {
		return rm.open(ctx, rm.auth)
	}
	app := rm.app
	app.Namespace = ns
	for retried := false; ; retried = true {
		tok, err := rm.c.tokens.Token(ctx, app)
		if err != nil {
			return nil, nil, &tokenError{err: err}
		}
		rm.noteToken(tok.Value)
		sess, ar, err := rm.open(ctx, &githttp.BasicAuth{Username: githubapp.Username, Password: tok.Value})
		if err == nil || retried || !refused(err) || !rm.c.tokens.Refused(app, tok) {
			return sess, ar, err
		}
		ctrl.LoggerFrom(ctx).Info("Git server refused a cached GitHub App token; minting another", "repo", rm.url)
	}
}

// noteToken remembers token among those scrubbed from messages.
func (rm *remote) noteToken(token string) {
	rm.tmu.Lock()
	defer rm.tmu.Unlock()
	if rm.tokens[0] != token {
		rm.tokens = [2]string{token, rm.tokens[0]}
	}
}

func (rm *remote) recentTokens() []string {
	rm.tmu.Lock()
	tokens := rm.tokens
	rm.tmu.Unlock()
	return tokens[:]
}

// tokenError is a failure to get a GitHub App token, before any git server was asked.
type tokenError struct{ err error }

func (e *tokenError) Error() string { return e.err.Error() }

// refused reports whether the git server turned the credentials down.
func refused(err error) bool {
	return errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed)
}

// open opens an upload-pack session with auth and reads the server's refs, counting what
// the server sends against the listing cap on every transport, and charging it to the
// manager's memory budget until the session is closed.
func (rm *remote) open(ctx context.Context, auth transport.AuthMethod) (transport.UploadPackSession, *packp.AdvRefs, error) {
	m := newMeter("ref listing", rm.c.limits.MaxListBytes, FlagMaxListBytes)
	if rm.c.limits.Memory != nil {
		m.charge = rm.c.limits.Memory.Charge()
	}
	tr, ep, w, release := rm.c.http, rm.ep, (*wire)(nil), func() {}
	if rm.ep.Protocol != "http" && rm.ep.Protocol != "https" {
		w = &wire{}
		w.use(m)
		var err error
		if ep, release, err = wiredEndpoint(ctx, rm.ep, w); err != nil {
			m.release()
			return nil, nil, err
		}
		if tr, err = client.NewClient(ep); err != nil {
			release()
			m.release()
			return nil, nil, err
		}
	}
	sess, err := tr.NewUploadPackSession(ep, auth)
	if err != nil {
		release()
		m.release()
		if over := m.exceeded(); over != nil {
			err = over
		}
		return nil, nil, err
	}
	if w != nil {
		sess = &wiredSession{UploadPackSession: sess, wire: w, release: release}
	}
	sess = chargedSession{UploadPackSession: sess, m: m}
	ar, err := sess.AdvertisedReferencesContext(withMeter(ctx, m))
	if err != nil {
		_ = sess.Close()
		if over := m.exceeded(); over != nil {
			err = over
		}
		return nil, nil, err
	}
	return sess, ar, nil
}

// chargedSession gives its listing's share of the memory budget back when it is closed:
// the advertisement it read is held as long as the session is in use.
type chargedSession struct {
	transport.UploadPackSession
	m *meter
}

func (s chargedSession) Close() error {
	defer s.m.release()
	return s.UploadPackSession.Close()
}

// overrun returns the fault of a recent fetch of h that went over the fetch cap.
func (rm *remote) overrun(h plumbing.Hash, shallow bool) error {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	o, ok := rm.overran[fetchKey{h, shallow}]
	if !ok || time.Since(o.at) >= overrunTTL {
		return nil
	}
	return o.err
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
	maxBytes := rm.c.limits.MaxFetchBytes
	if err := artifact.CheckFree(rm.c.dir, maxBytes, rm.c.limits.MinFreeBytes); err != nil {
		return fault.Retry(pulumiv1.ReasonSourceUnavailable, "cannot fetch commit %s from %s: %v", h, rm.url, err)
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
		err = rp.fetch(ctx, sess, ar, []plumbing.Hash{want}, keep, maxBytes)
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
		err = rm.full.fetch(ctx, sess, ar, wants, heads, maxBytes)
	}
	rm.size.Store(dirSize(rm.dir))
	var over *capError
	if errors.As(err, &over) {
		f := rm.capFault("fetch commit "+h.String()+" from", over, !shallow)
		rm.mu.Lock()
		if len(rm.overran) >= maxMemo {
			clear(rm.overran)
		}
		rm.overran[fetchKey{h, shallow}] = overrun{at: time.Now(), err: f}
		rm.mu.Unlock()
		return f
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
// never changes. A tarball not stored yet is made only while namespace ns is under its
// share of the artifact store.
func (rm *remote) artifact(ctx context.Context, ns string, h plumbing.Hash, dir string, store *artifact.Store, lim artifact.Limits) (string, error) {
	if err := rm.checkProject(ctx, h, dir); err != nil {
		return "", err
	}
	rm.mu.Lock()
	d, ok := rm.digests[h]
	rm.mu.Unlock()
	if !ok || !store.Has(d) {
		if err := store.Admit(ns); err != nil {
			return "", fault.Retry(pulumiv1.ReasonSourceUnavailable, "cannot store commit %s of %s: %v", h, rm.url, err)
		}
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
			return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "commit %s of %s cannot be packed: %v", h, rm.url, err)
		}
		d, err = store.Put(bytes.NewReader(tarball), lim.MaxBytes)
		if errors.Is(err, artifact.ErrTooLarge) {
			return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "commit %s of %s packs into more than the %d bytes an artifact may have", h, rm.url, lim.MaxBytes)
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
