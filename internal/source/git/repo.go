package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-git/go-billy/v5"
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
	"github.com/go-git/go-git/v5/storage/filesystem"
)

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
	return rp.openFS(create, osfs.New(rp.dir))
}

// openFS is open on bfs, a filesystem rooted at rp.dir.
func (rp *repo) openFS(create bool, bfs billy.Filesystem) (*filesystem.Storage, error) {
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
	st := filesystem.NewStorageWithOptions(bfs, cache.NewObjectLRU(objectCacheBytes), filesystem.Options{ExclusiveAccess: true})
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
// objects travel. A server sending more than maxBytes (0: no limit) fails the fetch with a
// *capError, and what it sent is removed.
func (rp *repo) fetch(ctx context.Context, sess transport.UploadPackSession, ar *packp.AdvRefs, wants []plumbing.Hash, keep map[plumbing.ReferenceName]plumbing.Hash, maxBytes int64) (err error) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	pfs := &packFS{Filesystem: osfs.New(rp.dir)}
	st, err := rp.openFS(true, pfs)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := removeTemps(rp.dir); err != nil {
		return err
	}
	var need []plumbing.Hash
	for _, w := range wants {
		if !isCommit(st, w) && !containsHash(need, w) {
			need = append(need, w)
		}
	}
	if len(need) > 0 {
		if err := rp.download(ctx, st, sess, ar, need, maxBytes); err != nil {
			if aerr := pfs.abort(); aerr != nil {
				return errors.Join(err, aerr)
			}
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

func (rp *repo) download(ctx context.Context, st *filesystem.Storage, sess transport.UploadPackSession, ar *packp.AdvRefs, need []plumbing.Hash, maxBytes int64) (err error) {
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
	m := newMeter("fetch", maxBytes, FlagMaxFetchBytes)
	meterWire(sess, m)
	resp, err := sess.UploadPack(withMeter(ctx, m), req)
	if errors.Is(err, transport.ErrEmptyUploadPackRequest) {
		return nil
	}
	if over := m.exceeded(); over != nil {
		return over
	}
	if err != nil {
		return err
	}
	defer func() {
		if cerr := resp.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	// Over HTTP the response body is counted already, and SSH and git:// connections on
	// their wire; any other stream is counted here, sideband framing included, so that
	// progress messages count too.
	var stream io.Reader = resp
	if !m.wired.Load() {
		stream = m.reader(resp)
	}
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		err = packfile.UpdateObjectStorage(st, sideband.NewDemuxer(sideband.Sideband64k, stream))
	case req.Capabilities.Supports(capability.Sideband):
		err = packfile.UpdateObjectStorage(st, sideband.NewDemuxer(sideband.Sideband, stream))
	default:
		err = packfile.UpdateObjectStorage(st, stream)
	}
	if over := m.exceeded(); over != nil {
		return over
	}
	if err != nil {
		return err
	}
	// Only now: a boundary recorded before its pack arrived would name commits the
	// repository does not have, if the pack never does.
	if rp.shallow {
		return updateShallow(st, resp.Shallows, resp.Unshallows)
	}
	return nil
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

func containsHash(hs []plumbing.Hash, h plumbing.Hash) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}
