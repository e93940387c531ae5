package plugincache

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/internal/artifact"
)

func TestParse_FileNames(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Plugin
		err  error
	}{
		{"pulumi-resource-kubernetes-v4.24.0-linux-amd64.tar.gz", Plugin{"resource", "kubernetes", "4.24.0", "linux", "amd64"}, nil},
		{"pulumi-resource-kubernetes-v4.25.0-alpha.1768448096+f47bc2d6-linux-arm64.tar.gz", Plugin{"resource", "kubernetes", "4.25.0-alpha.1768448096+f47bc2d6", "linux", "arm64"}, nil},
		{"pulumi-resource-kubernetes-cert-manager-v0.2.0-darwin-arm64.tar.gz", Plugin{"resource", "kubernetes-cert-manager", "0.2.0", "darwin", "arm64"}, nil},
		{"pulumi-language-yaml-v1.38.1-linux-amd64.tar.gz", Plugin{"language", "yaml", "1.38.1", "linux", "amd64"}, nil},
		{"../pulumi-resource-x-v1.0.0-linux-amd64.tar.gz", Plugin{}, ErrInvalid},
		{"pulumi-resource-x-v1.0.0-linux-amd64.tar.gz/..", Plugin{}, ErrInvalid},
		{"pulumi-resource-X-v1.0.0-linux-amd64.tar.gz", Plugin{}, ErrInvalid},
		{"pulumi-resource-x-1.0.0-linux-amd64.tar.gz", Plugin{}, ErrInvalid},
		{"pulumi-resource-x-v1.0-linux-amd64.tar.gz", Plugin{}, ErrInvalid},
		{"pulumi-evil-x-v1.0.0-linux-amd64.tar.gz", Plugin{}, ErrInvalid},
		{"pulumi-resource-x-v1.0.0-plan9-amd64.tar.gz", Plugin{}, ErrInvalid},
		{"pulumi-resource-x-v1.0.0-linux-amd64.zip", Plugin{}, ErrInvalid},
		{"pulumi-resource-" + string(bytes.Repeat([]byte("a"), 200)) + "-v1.0.0-linux-amd64.tar.gz", Plugin{}, ErrInvalid},
	} {
		t.Run(tc.file[:min(len(tc.file), 60)], func(t *testing.T) {
			got, err := Parse(tc.file)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Parse error = %v; want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

// source is a plugin server that counts what it sends.
type source struct {
	srv      *httptest.Server
	files    map[string][]byte
	requests atomic.Int64
	sent     atomic.Int64
	// hold, when set, delays every answer until it is closed.
	hold chan struct{}
}

func newSource(t *testing.T, files map[string][]byte) *source {
	s := &source{files: files}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if s.hold != nil {
			<-s.hold
		}
		b, ok := s.files[filepath.Base(r.URL.Path)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		n, _ := w.Write(b)
		s.sent.Add(int64(n))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func tarball(t *testing.T, size int) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.NoCompression)
	if _, err := zw.Write(bytes.Repeat([]byte{'x'}, size)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func newCache(t *testing.T, src *source, mutate func(*Options)) (*Cache, map[string]int64) {
	seen := map[string]int64{}
	var mu sync.Mutex
	o := Options{Dir: t.TempDir(), Source: src.srv.URL + "/releases/plugins", MaxBytes: 1 << 20, MaxFileBytes: 512 << 10,
		Observe: func(result string, n int64) {
			mu.Lock()
			defer mu.Unlock()
			seen[result]++
			seen["bytes"] += n
		}}
	if mutate != nil {
		mutate(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c, seen
}

const k8s = "pulumi-resource-kubernetes-v4.24.0-linux-amd64.tar.gz"

func read(t *testing.T, c *Cache, file string) ([]byte, error) {
	t.Helper()
	f, err := c.Open(context.Background(), file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return io.ReadAll(f)
}

func TestCache_Open_DownloadsOnceThenServesFromDisk(t *testing.T) {
	body := tarball(t, 100<<10)
	src := newSource(t, map[string][]byte{k8s: body})
	c, seen := newCache(t, src, nil)
	for range 3 {
		got, err := read(t, c, k8s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, body) {
			t.Fatal("served a different file than the source's")
		}
	}
	if got := src.sent.Load(); got != int64(len(body)) {
		t.Errorf("source sent %d bytes; want one download, %d", got, len(body))
	}
	if diff := cmp.Diff(map[string]int64{ResultDownload: 1, ResultHit: 2, "bytes": int64(len(body))}, seen); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
}

func TestCache_Open_ConcurrentAsksShareOneDownload(t *testing.T) {
	body := tarball(t, 10<<10)
	src := newSource(t, map[string][]byte{k8s: body})
	src.hold = make(chan struct{})
	c, _ := newCache(t, src, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			got, err := read(t, c, k8s)
			if err == nil && !bytes.Equal(got, body) {
				err = errors.New("wrong content")
			}
			errs <- err
		})
	}
	// Every asker is waiting on the one request the source holds.
	time.Sleep(200 * time.Millisecond)
	close(src.hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := src.requests.Load(); n != 1 {
		t.Errorf("source asked %d times; want once", n)
	}
}

func TestCache_Open_Refusals(t *testing.T) {
	big := tarball(t, 600<<10)
	notGzip := bytes.Repeat([]byte("<html>"), 10)
	const (
		bigFile    = "pulumi-resource-big-v1.0.0-linux-amd64.tar.gz"
		htmlFile   = "pulumi-resource-html-v1.0.0-linux-amd64.tar.gz"
		absent     = "pulumi-resource-kubernetes-v9.9.9-linux-amd64.tar.gz"
		disallowed = "pulumi-resource-aws-v7.0.0-linux-amd64.tar.gz"
	)
	src := newSource(t, map[string][]byte{bigFile: big, htmlFile: notGzip, disallowed: tarball(t, 10)})
	c, _ := newCache(t, src, func(o *Options) { o.Allow = []string{"kubernetes", "big", "html"} })
	for _, tc := range []struct {
		file string
		want error
	}{
		{"../../etc/passwd", ErrInvalid},
		{disallowed, ErrNotAllowed},
		{absent, ErrNotFound},
		{bigFile, ErrTooLarge},
	} {
		if _, err := read(t, c, tc.file); !errors.Is(err, tc.want) {
			t.Errorf("Open(%s) = %v; want %v", tc.file, err, tc.want)
		}
	}
	if _, err := read(t, c, htmlFile); err == nil {
		t.Error("Open of a file that is not gzip succeeded")
	}
	before := src.requests.Load()
	if _, err := read(t, c, absent); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Open of an absent plugin = %v; want ErrNotFound", err)
	}
	if src.requests.Load() != before {
		t.Error("a plugin the source just said it lacks was asked for again")
	}
	entries, _ := os.ReadDir(c.o.Dir)
	if len(entries) != 0 {
		t.Errorf("refused downloads left %d files in the cache", len(entries))
	}
}

func TestCache_Open_EvictsLeastRecentlyUsed(t *testing.T) {
	files := map[string][]byte{}
	names := []string{
		"pulumi-resource-a-v1.0.0-linux-amd64.tar.gz",
		"pulumi-resource-b-v1.0.0-linux-amd64.tar.gz",
		"pulumi-resource-c-v1.0.0-linux-amd64.tar.gz",
	}
	for _, n := range names {
		files[n] = tarball(t, 400<<10)
	}
	src := newSource(t, files)
	c, _ := newCache(t, src, nil) // 1 MiB: two fit, not three
	for _, n := range []string{names[0], names[1], names[0], names[2]} {
		if _, err := read(t, c, n); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // distinct use times
	}
	for i, want := range []bool{true, false, true} {
		_, err := os.Stat(filepath.Join(c.o.Dir, names[i]))
		if got := err == nil; got != want {
			t.Errorf("%s cached = %v; want %v (b was the least recently used)", names[i], got, want)
		}
	}
}

func TestNew_RefusesBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Dir: t.TempDir(), Source: "file:///plugins", MaxBytes: 10, MaxFileBytes: 5},
		{Dir: t.TempDir(), Source: "https://get.pulumi.com/releases/plugins", MaxBytes: 10, MaxFileBytes: 50},
		{Dir: t.TempDir(), Source: "https://get.pulumi.com/releases/plugins"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}

func TestCache_Open_RefusesADownloadThatWouldFillTheVolume(t *testing.T) {
	src := newSource(t, map[string][]byte{k8s: tarball(t, 10)})
	c, _ := newCache(t, src, func(o *Options) { o.MinFree = 1 << 60 })
	if _, err := read(t, c, k8s); !errors.Is(err, artifact.ErrNoSpace) {
		t.Fatalf("Open = %v; want ErrNoSpace", err)
	}
	if n := src.requests.Load(); n != 0 {
		t.Errorf("the source was asked %d times; want none", n)
	}
}
