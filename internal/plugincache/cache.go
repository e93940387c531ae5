package plugincache

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stackwright/stackwright/internal/artifact"
)

var (
	// ErrInvalid: the name is not a plugin tarball's as the Pulumi CLI forms it.
	ErrInvalid = errors.New("not a plugin file name")
	// ErrNotAllowed: the platform does not let runners download this plugin.
	ErrNotAllowed = errors.New("plugin not allowed")
	// ErrNotFound: the plugin source does not have this file.
	ErrNotFound = errors.New("plugin not found at the plugin source")
	// ErrTooLarge: the file is larger than one plugin may be.
	ErrTooLarge = errors.New("plugin larger than the cache takes")
)

// fileName is how the CLI names a plugin tarball (sdk/go/common/workspace, httpSource):
// pulumi-<kind>-<name>-v<version>-<os>-<arch>.tar.gz. The version is semver with
// optional pre-release and build parts.
var fileName = regexp.MustCompile(`^pulumi-(resource|language|analyzer|converter|tool)-([a-z0-9]+(?:-[a-z0-9]+)*)-v([0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?)-(linux|darwin|windows)-(amd64|arm64)\.tar\.gz$`)

// maxFileName bounds a requested name before it is matched.
const maxFileName = 200

// Plugin is a parsed plugin file name.
type Plugin struct {
	Kind, Name, Version, OS, Arch string
}

// Parse validates a plugin file name and returns its parts.
func Parse(file string) (Plugin, error) {
	if len(file) > maxFileName {
		return Plugin{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalid, maxFileName)
	}
	m := fileName.FindStringSubmatch(file)
	if m == nil {
		return Plugin{}, fmt.Errorf("%w: %q", ErrInvalid, file)
	}
	return Plugin{Kind: m[1], Name: m[2], Version: m[3], OS: m[4], Arch: m[5]}, nil
}

// Options configure a Cache.
type Options struct {
	// Dir holds the cached tarballs.
	Dir string
	// Source is the base URL files are fetched from (<Source>/<file>), as the CLI's
	// PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES and `pulumi plugin install --server` take it.
	Source string
	// Allow names the plugins runners may download; empty allows any.
	Allow []string
	// MaxBytes bounds the cache on disk: least recently used files go first.
	MaxBytes int64
	// MaxFileBytes bounds one tarball.
	MaxFileBytes int64
	// MinFree is the space a download must leave free on Dir's volume, at its worst
	// (MaxFileBytes written); 0 checks nothing.
	MinFree int64
	// MaxDownloads bounds the downloads from Source running at once; 0 means 2.
	MaxDownloads int
	// NotFoundTTL is how long a file Source did not have is answered as not found
	// without asking again; 0 means a minute.
	NotFoundTTL time.Duration
	// Client fetches from Source; nil means one with a 10-minute timeout.
	Client *http.Client
	// Observe, when set, is told of each request's outcome (hit, download, not_found,
	// refused, error) and of the bytes a download fetched.
	Observe func(result string, downloaded int64)
}

// Outcomes passed to Options.Observe.
const (
	ResultHit      = "hit"
	ResultDownload = "download"
	ResultNotFound = "not_found"
	ResultRefused  = "refused"
	ResultError    = "error"
)

// Cache is the manager's plugin cache. Its methods are safe for concurrent use.
type Cache struct {
	o      Options
	source *url.URL
	slots  chan struct{}

	mu       sync.Mutex
	inflight map[string]*flight
	missing  map[string]time.Time
}

// flight is one download that concurrent requests for the same file wait on.
type flight struct {
	done chan struct{}
	err  error
}

// New opens the cache in o.Dir, creating it and removing temp files a crash left.
func New(o Options) (*Cache, error) {
	u, err := url.Parse(o.Source)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("plugin source %q: want an http or https URL", o.Source)
	}
	if o.MaxBytes <= 0 || o.MaxFileBytes <= 0 || o.MaxFileBytes > o.MaxBytes {
		return nil, fmt.Errorf("plugin cache bounds: want 0 < largest plugin (%d) <= cache size (%d)", o.MaxFileBytes, o.MaxBytes)
	}
	if o.MaxDownloads <= 0 {
		o.MaxDownloads = 2
	}
	if o.NotFoundTTL <= 0 {
		o.NotFoundTTL = time.Minute
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Minute}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create plugin cache directory: %w", err)
	}
	temps, _ := filepath.Glob(filepath.Join(o.Dir, tempPrefix+"*"))
	for _, t := range temps {
		_ = os.Remove(t)
	}
	return &Cache{o: o, source: u, slots: make(chan struct{}, o.MaxDownloads), inflight: map[string]*flight{}, missing: map[string]time.Time{}}, nil
}

// tempPrefix names downloads in progress; they are never served.
const tempPrefix = ".download-"

// Open returns the cached tarball named file, downloading it first when the cache does
// not have it. The caller closes the file.
func (c *Cache) Open(ctx context.Context, file string) (*os.File, error) {
	f, result, downloaded, err := c.open(ctx, file)
	if c.o.Observe != nil {
		c.o.Observe(result, downloaded)
	}
	return f, err
}

func (c *Cache) open(ctx context.Context, file string) (*os.File, string, int64, error) {
	p, err := Parse(file)
	if err != nil {
		return nil, ResultRefused, 0, err
	}
	if len(c.o.Allow) > 0 && !slices.Contains(c.o.Allow, p.Name) {
		return nil, ResultRefused, 0, fmt.Errorf("%w: the platform allows downloads of %s only", ErrNotAllowed, strings.Join(c.o.Allow, ", "))
	}
	path := filepath.Join(c.o.Dir, file)
	if f, err := c.use(path); err == nil {
		return f, ResultHit, 0, nil
	}
	n, err := c.download(ctx, file)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, ResultNotFound, 0, err
	case errors.Is(err, ErrTooLarge):
		return nil, ResultRefused, 0, err
	case err != nil:
		return nil, ResultError, 0, err
	}
	f, err := c.use(path)
	if err != nil {
		// Evicted between its download and now: only a cache smaller than a few plugins
		// does that.
		return nil, ResultError, n, fmt.Errorf("failed to open cached plugin: %w", err)
	}
	if n == 0 {
		// Another ask fetched it meanwhile; this one was served from disk.
		return f, ResultHit, 0, nil
	}
	return f, ResultDownload, n, nil
}

// use opens a cached file and marks it used now (its modification time is its last use,
// which eviction orders by).
func (c *Cache) use(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	_ = os.Chtimes(path, now, now)
	return f, nil
}

// download fetches file once however many ask for it at the same time, and returns the
// bytes it fetched (0 for those who waited on another's download).
func (c *Cache) download(ctx context.Context, file string) (int64, error) {
	c.mu.Lock()
	if until, ok := c.missing[file]; ok {
		if time.Now().Before(until) {
			c.mu.Unlock()
			return 0, fmt.Errorf("%w: %s (asked less than %s ago)", ErrNotFound, file, c.o.NotFoundTTL)
		}
		delete(c.missing, file)
	}
	if fl, ok := c.inflight[file]; ok {
		c.mu.Unlock()
		select {
		case <-fl.done:
			return 0, fl.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	fl := &flight{done: make(chan struct{})}
	c.inflight[file] = fl
	c.mu.Unlock()

	// The download is the cache's, not the asker's: a runner that gives up does not waste
	// what the next one would fetch again.
	n, err := c.fetch(context.WithoutCancel(ctx), file)
	c.mu.Lock()
	delete(c.inflight, file)
	if errors.Is(err, ErrNotFound) {
		c.missing[file] = time.Now().Add(c.o.NotFoundTTL)
		c.pruneMissing()
	}
	c.mu.Unlock()
	fl.err = err
	close(fl.done)
	return n, err
}

// maxMissing bounds the names remembered as not found.
const maxMissing = 1024

// pruneMissing drops expired entries, and the oldest when there are too many. c.mu is held.
func (c *Cache) pruneMissing() {
	now := time.Now()
	for k, until := range c.missing {
		if now.After(until) {
			delete(c.missing, k)
		}
	}
	for len(c.missing) > maxMissing {
		var oldest string
		for k, until := range c.missing {
			if oldest == "" || until.Before(c.missing[oldest]) {
				oldest = k
			}
		}
		delete(c.missing, oldest)
	}
}

// fetch downloads file from the source into the cache and evicts what no longer fits.
func (c *Cache) fetch(ctx context.Context, file string) (int64, error) {
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if err := artifact.CheckFree(c.o.Dir, c.o.MaxFileBytes, c.o.MinFree); err != nil {
		return 0, fmt.Errorf("failed to fetch plugin %s: %w", file, err)
	}
	src := c.source.JoinPath(file).String()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return 0, fmt.Errorf("failed to fetch plugin %s: %w", file, err)
	}
	resp, err := c.o.Client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("failed to fetch plugin %s from the plugin source: %w", file, err)
	}
	defer func() { _ = resp.Body.Close() }()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone || resp.StatusCode == http.StatusForbidden:
		// S3-style sources answer 403 for a key that does not exist.
		return 0, fmt.Errorf("%w: %s (%s)", ErrNotFound, file, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return 0, fmt.Errorf("failed to fetch plugin %s from the plugin source: %s", file, resp.Status)
	case resp.ContentLength > c.o.MaxFileBytes:
		return 0, fmt.Errorf("%w: %s has %d bytes, more than %d", ErrTooLarge, file, resp.ContentLength, c.o.MaxFileBytes)
	}
	tmp, err := os.CreateTemp(c.o.Dir, tempPrefix)
	if err != nil {
		return 0, fmt.Errorf("failed to create plugin cache file: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	n, err := copyTarball(tmp, resp.Body, c.o.MaxFileBytes)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("failed to fetch plugin %s: %w", file, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(c.o.Dir, file)); err != nil {
		return n, fmt.Errorf("failed to store plugin %s: %w", file, err)
	}
	c.evict(file)
	return n, nil
}

// copyTarball copies at most limit bytes of a gzip stream from r to f and syncs it.
func copyTarball(f *os.File, r io.Reader, limit int64) (int64, error) {
	br := bufio.NewReader(io.LimitReader(r, limit+1))
	if magic, err := br.Peek(2); err != nil || magic[0] != 0x1f || magic[1] != 0x8b {
		return 0, errors.New("the plugin source did not send a gzip file")
	}
	n, err := io.Copy(f, br)
	if err != nil {
		return n, err
	}
	if n > limit {
		return n, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	return n, f.Sync()
}

// evict removes the least recently used files until the cache fits MaxBytes, never the
// one just added (Options guarantees it fits alone).
func (c *Cache) evict(keep string) {
	entries, err := os.ReadDir(c.o.Dir)
	if err != nil {
		return
	}
	type cached struct {
		name string
		size int64
		used time.Time
	}
	var (
		files []cached
		total int64
	)
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		files = append(files, cached{e.Name(), info.Size(), info.ModTime()})
		total += info.Size()
	}
	sort.Slice(files, func(i, j int) bool { return files[i].used.Before(files[j].used) })
	for _, f := range files {
		if total <= c.o.MaxBytes {
			return
		}
		if f.name == keep {
			continue
		}
		// A runner reading the file keeps its open descriptor.
		if os.Remove(filepath.Join(c.o.Dir, f.name)) == nil {
			total -= f.size
		}
	}
}
