package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-billy/v5"

	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/budget"
)

// Flag names of the manager's settings of CacheLimits. Faults name the flag to change, so
// the manager registers its flags under these names.
const (
	FlagMaxFetchBytes     = "max-git-fetch-bytes"
	FlagMaxListBytes      = "max-git-list-bytes"
	FlagMaxNamespaceBytes = "max-git-cache-bytes-per-namespace"
	FlagMaxCacheBytes     = "max-git-cache-bytes"
	FlagMaxListingsBytes  = "max-git-listings-bytes"
)

// CacheLimits bound what the Stacks of one namespace, whose authors may be hostile to the
// others, can make the shared git cache download and keep on the manager's data volume.
// A zero field means no limit.
type CacheLimits struct {
	// MaxFetchBytes bounds the bytes one fetch receives from the server, and so the pack
	// it writes. A fetch over it is abandoned and its partial pack removed; the Stack
	// stalls, since fetching again would fetch the same.
	MaxFetchBytes int64
	// MaxListBytes bounds one ref listing (the server's ref advertisement), which is held
	// in memory: counted on the HTTP response body, or on the SSH or git:// connection
	// (wire.go).
	MaxListBytes int64
	// MaxNamespaceBytes bounds the cache disk attributed to one namespace: the size of
	// every repository its Stacks used within the retention Collect is called with (since
	// the manager started, when it is never called), counted in full against each
	// namespace using it. A namespace at or over it is refused new fetches; commits
	// already in the cache are still served.
	MaxNamespaceBytes int64
	// MaxCacheBytes bounds the cache disk of every namespace together: before a fetch
	// that could pass it, the repositories no resolve is using are removed, least
	// recently used first, and if that is not enough the fetch is refused (its Stack
	// retries). It counts the repositories this process has opened.
	MaxCacheBytes int64
	// MaxListingsBytes bounds the ref listings kept in memory between polls, across every
	// repository (estimated from their refs): past it, the least recently used listings
	// are dropped, and listed again when next needed.
	MaxListingsBytes int64
	// MinFreeBytes is the space a fetch must leave free on the cache's volume, at its
	// worst (MaxFetchBytes written): a fetch that could leave less is refused, and its
	// Stack retries (the collector or the platform team may make room).
	MinFreeBytes int64
	// Memory is the manager's budget for tenant input held in memory, which every ref
	// listing is charged to while it is read and used; nil is no budget.
	Memory *budget.Budget
}

// DefaultCacheLimits are the limits of NewCache. A ref listing is far larger than one
// would guess: over v0/v1 of git's protocol, which go-git speaks, GitHub advertises every
// pull request's refs, some 20 MiB for the largest public repositories.
var DefaultCacheLimits = CacheLimits{
	MaxFetchBytes:     512 << 20,
	MaxListBytes:      64 << 20,
	MaxNamespaceBytes: 1 << 30,
	MaxCacheBytes:     6 << 30,
	MaxListingsBytes:  256 << 20,
}

// capError reports an operation that received more than its cap.
type capError struct {
	what  string // "fetch", "ref listing"
	limit int64
	flag  string
}

func (e *capError) Error() string {
	return fmt.Sprintf("the %s exceeded %s (--%s)", e.what, artifact.FormatBytes(e.limit), e.flag)
}

// meter counts the bytes one operation receives from a server against a cap. Callers ask
// the meter whether it tripped rather than look for its error in what go-git returns:
// go-git rewords some errors of the readers it is given.
type meter struct {
	err   *capError // nil: no limit
	n     atomic.Int64
	over  atomic.Bool
	wired atomic.Bool // an HTTP response body is counted: the stream above it need not be
	// charge, when set, takes every byte counted from the manager's memory budget;
	// spent holds its refusal.
	charge *budget.Charge
	spent  atomic.Pointer[error]
}

func newMeter(what string, limit int64, flag string) *meter {
	m := &meter{}
	if limit > 0 {
		m.err = &capError{what: what, limit: limit, flag: flag}
	}
	return m
}

// exceeded returns the cap error once the operation went over its cap, or the budget's
// refusal once the memory budget could not hold what it received.
func (m *meter) exceeded() error {
	if m.over.Load() {
		return m.err
	}
	if err := m.spent.Load(); err != nil {
		return *err
	}
	return nil
}

// release gives back what the meter took from the memory budget.
func (m *meter) release() {
	if m.charge != nil {
		m.charge.Release()
	}
}

func (m *meter) reader(r io.Reader) io.Reader { return &meteredReader{r: r, m: m} }

type meteredReader struct {
	r io.Reader
	m *meter
}

func (r *meteredReader) Read(p []byte) (int, error) {
	if r.m.err == nil && r.m.charge == nil {
		return r.r.Read(p)
	}
	if err := r.m.exceeded(); err != nil {
		return 0, err
	}
	n, err := r.r.Read(p)
	if r.m.err != nil {
		if total := r.m.n.Add(int64(n)); total > r.m.err.limit {
			r.m.over.Store(true)
			// Not one byte past the cap reaches the disk.
			return max(0, n-int(total-r.m.err.limit)), r.m.err
		}
	}
	if r.m.charge != nil && n > 0 {
		if cerr := r.m.charge.Take(int64(n)); cerr != nil {
			// The bytes of this one read still go through: a stream cut before its first
			// byte reads to go-git as an empty repository, and it then waits 10 s for an
			// explanation on a channel that never has one.
			r.m.spent.Store(&cerr)
			return n, cerr
		}
	}
	return n, err
}

type meterKey struct{}

func withMeter(ctx context.Context, m *meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// meteredTransport counts every HTTP response body against the meter of its request's
// context. go-git reads the ref advertisement itself, so the wire is the only place a
// listing can be bounded; a fetch's body is counted whole, which also bounds what go-git
// reads into memory before the pack starts.
type meteredTransport struct {
	base http.RoundTripper
}

func (t meteredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil {
		return res, err
	}
	if m, ok := req.Context().Value(meterKey{}).(*meter); ok {
		m.wired.Store(true)
		res.Body = meteredBody{Reader: m.reader(res.Body), Closer: res.Body}
	}
	return res, nil
}

type meteredBody struct {
	io.Reader
	io.Closer
}

// packFS is a cache repository's filesystem for one fetch. go-git writes a fetched pack
// to a temporary file (objects/pack/tmp_pack_*) and renames it once complete; when the
// stream breaks off (a fetch over its cap, a dropped connection, a timeout) it returns the
// error with the file still open and on disk. abort closes what packFS saw opened, which
// releases the space at once rather than at some later garbage collection, and removes
// it.
type packFS struct {
	billy.Filesystem

	mu    sync.Mutex
	temps []billy.File
}

// isTemp reports whether name is one of go-git's temporary object files.
func isTemp(name string) bool {
	base := filepath.Base(name)
	return strings.HasPrefix(base, "tmp_pack_") || strings.HasPrefix(base, "tmp_obj_")
}

func (p *packFS) TempFile(dir, prefix string) (billy.File, error) {
	f, err := p.Filesystem.TempFile(dir, prefix)
	if err == nil && isTemp(f.Name()) {
		p.track(f)
	}
	return f, err
}

func (p *packFS) Open(name string) (billy.File, error) {
	f, err := p.Filesystem.Open(name)
	if err == nil && isTemp(name) {
		p.track(f)
	}
	return f, err
}

func (p *packFS) track(f billy.File) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.temps = append(p.temps, f)
}

// Chmod and Capabilities pass on what go-git looks for beyond billy.Filesystem (it makes
// packs read-only with Chmod).
func (p *packFS) Chmod(name string, mode os.FileMode) error {
	if c, ok := p.Filesystem.(billy.Chmod); ok {
		return c.Chmod(name, mode)
	}
	return nil
}

func (p *packFS) Capabilities() billy.Capability { return billy.Capabilities(p.Filesystem) }

// abort closes and removes the temporary files of a failed fetch. go-git has finished
// with them once the fetch returned.
func (p *packFS) abort() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, f := range p.temps {
		_ = f.Close() // go-git may have closed it already
		if err := p.Remove(f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	p.temps = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("failed to remove partial pack: %w", err)
	}
	return nil
}

// removeTemps removes the temporary object files of a repository, which a manager killed
// mid-fetch leaves behind; nothing else removes them. Called with the repository's mutex
// held, so no fetch is writing.
func removeTemps(repoDir string) error {
	names, err := filepath.Glob(filepath.Join(repoDir, "objects", "pack", "tmp_*"))
	if err != nil {
		return fmt.Errorf("failed to list partial packs: %w", err)
	}
	for _, name := range names {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("failed to remove partial pack: %w", err)
		}
	}
	return nil
}

// dirSize returns the bytes of the regular files under dir. Files that vanish while it
// walks are skipped: a concurrent fetch may be renaming or removing.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil //nolint:nilerr // a vanished entry is skipped, not an error of the walk
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
