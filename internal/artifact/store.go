package artifact

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTooLarge: the content is larger than the caller's limit.
var ErrTooLarge = errors.New("artifact too large")

// staleTempAge is how old a temp file must be before NewStore deletes it. A Put that
// crashed leaves its temp file behind and nothing else would ever remove it; the age keeps
// a concurrent Put from another Store on the same directory safe.
const staleTempAge = time.Hour

// Store keeps tarballs under dir/sha256/<hex>.tar.gz. Files are written once, under their
// final name only after they are complete and synced, so a name that exists always holds
// the content its digest promises; readers never see a partial artifact.
//
// A file's modification time is when the store last handed the artifact out (Put, Has,
// Open): Collect removes only artifacts unused for a while, so a digest a resolver has just
// returned, and that no object names yet, survives until the Stack records it.
type Store struct {
	dir string
	// reserve is the space Put keeps free on the store's volume (SetMinFree).
	reserve atomic.Int64
	// mu orders Collect's removals against the uses that keep an artifact alive: an
	// artifact is either removed before a use (which then finds it absent) or used first
	// (and then too recent to remove).
	mu sync.Mutex

	// nsMu guards the namespaces' accounts (namespaces.go): byNS[ns][digest].
	nsMu     sync.Mutex
	nsLimit  int64
	nsWindow time.Duration
	byNS     map[string]map[string]nsUse
}

// usedGranularity is how stale a use time may get before a use rewrites it: a fleet's
// reconciles call Has constantly, and a minute is nothing next to Collect's retention.
const usedGranularity = time.Minute

// NewStore opens (creating it when needed) the store rooted at dir.
func NewStore(dir string) (*Store, error) {
	s := &Store{dir: dir}
	for _, d := range []string{s.blobDir(), s.tmpDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("failed to create artifact store directory: %w", err)
		}
	}
	if err := s.removeStaleTemps(time.Now().Add(-staleTempAge)); err != nil {
		return nil, err
	}
	return s, nil
}

// SetMinFree makes Put refuse, with ErrNoSpace, content that could leave less than n bytes
// free on the store's volume (0, the default, checks nothing).
func (s *Store) SetMinFree(n int64) { s.reserve.Store(n) }

// Dir is the directory the store was opened on.
func (s *Store) Dir() string { return s.dir }

// Digest returns the digest of b, as Put would compute it.
func Digest(b []byte) string {
	h := sha256.New()
	h.Write(b)
	return digestOf(h)
}

// Put stores the content of r and returns its digest. It fails with ErrTooLarge when r
// holds more than maxBytes (which must be positive), and succeeds without rewriting
// anything when the content is already stored.
func (s *Store) Put(r io.Reader, maxBytes int64) (string, error) {
	return s.put(r, maxBytes, "")
}

// PutVerified stores the content of r only if it hashes to want; otherwise it fails with
// ErrDigestMismatch and leaves nothing behind. It is for content fetched from elsewhere
// under a digest someone else published.
func (s *Store) PutVerified(r io.Reader, maxBytes int64, want string) error {
	if err := ValidateDigest(want); err != nil {
		return fmt.Errorf("failed to store artifact: %w", err)
	}
	_, err := s.put(r, maxBytes, want)
	return err
}

func (s *Store) put(r io.Reader, maxBytes int64, want string) (digest string, err error) {
	if maxBytes <= 0 {
		return "", fmt.Errorf("failed to store artifact: maxBytes must be positive, got %d", maxBytes)
	}
	if err := CheckFree(s.dir, maxBytes, s.reserve.Load()); err != nil {
		return "", fmt.Errorf("failed to store artifact: %w", err)
	}
	tmp, err := os.CreateTemp(s.tmpDir(), "put-*")
	if err != nil {
		return "", fmt.Errorf("failed to create temp file: %w", err)
	}
	renamed, closed := false, false
	defer func() {
		if !closed {
			_ = tmp.Close()
		}
		if !renamed {
			_ = os.Remove(tmp.Name())
		}
	}()

	h := sha256.New()
	// One byte past the limit tells "exactly maxBytes" from "more".
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, satAdd(maxBytes, 1)))
	if err != nil {
		return "", fmt.Errorf("failed to write artifact: %w", err)
	}
	if n > maxBytes {
		return "", fmt.Errorf("failed to store artifact: %w: more than %d bytes", ErrTooLarge, maxBytes)
	}
	digest = digestOf(h)
	if want != "" && digest != want {
		return "", fmt.Errorf("failed to verify artifact: content has digest %s, want %s: %w", digest, want, ErrDigestMismatch)
	}
	// Read-only: an artifact is immutable, and its digest is its name.
	if err := tmp.Chmod(0o444); err != nil {
		return "", fmt.Errorf("failed to write artifact: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("failed to sync artifact: %w", err)
	}
	closed = true
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("failed to write artifact: %w", err)
	}

	final := s.path(digest[len(digestPrefix):])
	s.mu.Lock()
	defer s.mu.Unlock()
	if fi, err := os.Lstat(final); err == nil {
		markUsed(final, fi)
		return digest, nil
	}
	// Two concurrent Puts of the same content may both get here; rename replaces
	// atomically and both files hold the same bytes, so either outcome is correct.
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", fmt.Errorf("failed to store artifact %s: %w", digest, err)
	}
	renamed = true
	if err := syncDir(s.blobDir()); err != nil {
		return "", err
	}
	return digest, nil
}

// RelPath is where the store keeps an artifact, relative to its root ("sha256/<hex>.tar.gz"):
// what Flux calls an artifact's path. It is "" for a malformed digest.
func RelPath(digest string) string {
	h, err := digestHex(digest)
	if err != nil {
		return ""
	}
	return "sha256/" + h + ".tar.gz"
}

// Has reports whether the artifact is stored. Invalid digests are never stored.
func (s *Store) Has(digest string) bool {
	h, err := digestHex(digest)
	if err != nil {
		return false
	}
	path := s.path(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	markUsed(path, fi)
	return true
}

// Open returns the stored tarball. The error wraps fs.ErrNotExist when it is absent and
// ErrInvalidDigest when digest is malformed.
func (s *Store) Open(digest string) (io.ReadCloser, error) {
	h, err := digestHex(digest)
	if err != nil {
		return nil, fmt.Errorf("failed to open artifact: %w", err)
	}
	path := s.path(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Once open, the content stays readable even if Collect removes the name.
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to open artifact %s: %w", digest, err)
	}
	if fi, err := f.Stat(); err == nil {
		markUsed(path, fi)
	}
	return f, nil
}

// markUsed records a use in the file's modification time. A failure only makes the
// artifact look older; the next use tries again.
func markUsed(path string, fi fs.FileInfo) {
	if now := time.Now(); now.Sub(fi.ModTime()) > usedGranularity {
		_ = os.Chtimes(path, now, now)
	}
}

// Collect removes the artifacts keep does not claim that have not been used for
// unusedFor, and returns how many it removed and the bytes freed. It is safe while the
// store is in use: an artifact used meanwhile is kept.
func (s *Store) Collect(keep func(digest string) bool, unusedFor time.Duration) (removed int, freed int64, err error) {
	entries, err := os.ReadDir(s.blobDir())
	if err != nil {
		return 0, 0, fmt.Errorf("failed to list artifacts: %w", err)
	}
	for _, e := range entries {
		h, ok := strings.CutSuffix(e.Name(), ".tar.gz")
		if !ok || keep(digestPrefix+h) {
			continue
		}
		n, err := s.removeUnused(filepath.Join(s.blobDir(), e.Name()), time.Now().Add(-unusedFor))
		if err != nil {
			return removed, freed, err
		}
		if n >= 0 {
			removed, freed = removed+1, freed+n
			s.forget(digestPrefix + h)
		}
	}
	return removed, freed, nil
}

// removeUnused removes path if it was last used before cutoff and returns its size, or
// -1 when it kept it.
func (s *Store) removeUnused(path string, cutoff time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.ModTime().After(cutoff) {
		return -1, nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return -1, fmt.Errorf("failed to remove artifact %s: %w", filepath.Base(path), err)
	}
	return fi.Size(), nil
}

// Extract unpacks the stored artifact into dir (see the package-level Extract), hashing the
// bytes as they are unpacked: a store corrupted on disk fails with ErrDigestMismatch and
// leaves dir as it found it.
func (s *Store) Extract(digest, dir string, lim Limits) error {
	rc, err := s.Open(digest)
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	tee := io.TeeReader(rc, h)
	return extract(tee, dir, lim, func() error {
		// The gzip reader stops at the end of the archive; the hash must cover every byte.
		if _, err := io.Copy(io.Discard, tee); err != nil {
			return fmt.Errorf("failed to read artifact %s: %w", digest, err)
		}
		if got := digestOf(h); got != digest {
			return fmt.Errorf("failed to verify artifact %s: content has digest %s: %w", digest, got, ErrDigestMismatch)
		}
		return nil
	})
}

// Remove deletes the artifact; removing an absent one is not an error, so concurrent
// garbage collectors need no coordination.
func (s *Store) Remove(digest string) error {
	h, err := digestHex(digest)
	if err != nil {
		return fmt.Errorf("failed to remove artifact: %w", err)
	}
	if err := os.Remove(s.path(h)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("failed to remove artifact %s: %w", digest, err)
	}
	return nil
}

func (s *Store) blobDir() string { return filepath.Join(s.dir, "sha256") }
func (s *Store) tmpDir() string  { return filepath.Join(s.dir, "tmp") }
func (s *Store) path(hex string) string {
	return filepath.Join(s.dir, filepath.FromSlash(RelPath("sha256:"+hex)))
}

func (s *Store) removeStaleTemps(before time.Time) error {
	entries, err := os.ReadDir(s.tmpDir())
	if err != nil {
		return fmt.Errorf("failed to list artifact store temp files: %w", err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || fi.ModTime().After(before) {
			continue
		}
		if err := os.Remove(filepath.Join(s.tmpDir(), e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("failed to remove stale temp file: %w", err)
		}
	}
	return nil
}

// satAdd adds non-negative numbers, saturating instead of overflowing on absurd limits.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// syncDir makes a rename in dir durable: without it a crash can forget the new name even
// though the file's data was synced.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("failed to sync artifact directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("failed to sync artifact directory: %w", err)
	}
	return nil
}
