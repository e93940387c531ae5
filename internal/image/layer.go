package image

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// writeLayer writes entries as a gzip-compressed tar into a new file under dir. The digest
// and diff ID are hashed while writing, so building an image reads each source file once
// and never decompresses its own layers again.
//
// The bytes depend only on the entries, epoch and the Go release's compress/flate (stable
// for years): entries are sorted, every header has explicit owners and the epoch as mtime,
// and the gzip header has no name or time.
func writeLayer(dir string, epoch time.Time, entries []entry) (_ v1.Layer, err error) {
	entries = sortedEntries(entries)
	f, err := os.CreateTemp(dir, "layer-*.tar.gz")
	if err != nil {
		return nil, fmt.Errorf("failed to create layer file: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("failed to write layer file: %w", cerr)
		}
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()

	compressed := newCounter()
	buf := bufio.NewWriterSize(io.MultiWriter(f, compressed), 1<<20)
	zw, err := gzip.NewWriterLevel(buf, gzip.DefaultCompression)
	if err != nil {
		return nil, fmt.Errorf("failed to create gzip writer: %w", err)
	}
	uncompressed := newCounter()
	tw := tar.NewWriter(io.MultiWriter(zw, uncompressed))
	for _, e := range entries {
		if err := writeEntry(tw, epoch, e); err != nil {
			return nil, fmt.Errorf("failed to add /%s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("failed to finish layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("failed to finish layer: %w", err)
	}
	if err := buf.Flush(); err != nil {
		return nil, fmt.Errorf("failed to write layer file: %w", err)
	}
	return &fileLayer{
		path:   f.Name(),
		digest: compressed.sum(),
		diffID: uncompressed.sum(),
		size:   compressed.n,
	}, nil
}

// sortedEntries sorts by name, which also puts each directory before its contents: a name
// sorts before every name it is a prefix of.
func sortedEntries(entries []entry) []entry {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	return entries
}

func writeEntry(tw *tar.Writer, epoch time.Time, e entry) error {
	hdr := &tar.Header{
		Name:    e.name,
		Mode:    tarMode(e.mode),
		Uid:     e.uid,
		Gid:     e.gid,
		ModTime: epoch,
	}
	if e.dir {
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		return tw.WriteHeader(hdr)
	}
	hdr.Typeflag = tar.TypeReg
	if e.source == "" {
		hdr.Size = int64(len(e.data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(e.data)
		return err
	}

	src, err := os.Open(e.source)
	if err != nil {
		return err
	}
	defer src.Close()
	info, err := src.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", e.source)
	}
	hdr.Size = info.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	// A file that grows while being copied fails here (tar.ErrWriteTooLong); one that
	// shrinks fails at the next header, so a truncated binary never ends up in an image.
	if _, err := io.Copy(tw, src); err != nil {
		return fmt.Errorf("failed to copy %s: %w", e.source, err)
	}
	return nil
}

// tarMode converts to the header's Unix mode, whose special bits differ from fs.FileMode's.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// fileLayer is a layer whose compressed bytes live in a file and whose hashes are known.
type fileLayer struct {
	path           string
	digest, diffID v1.Hash
	size           int64
}

var _ v1.Layer = (*fileLayer)(nil)

func (l *fileLayer) Digest() (v1.Hash, error)             { return l.digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)             { return l.diffID, nil }
func (l *fileLayer) Size() (int64, error)                 { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error)  { return types.OCILayer, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)   { return os.Open(l.path) }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) { return openGzip(l.path) }

func openGzip(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("failed to read layer %s: %w", path, err)
	}
	return &gzipFile{Reader: zr, f: f}, nil
}

type gzipFile struct {
	*gzip.Reader
	f *os.File
}

func (g *gzipFile) Close() error {
	return errors.Join(g.Reader.Close(), g.f.Close())
}

// counter hashes and counts what is written through it.
type counter struct {
	h hash.Hash
	n int64
}

func newCounter() *counter { return &counter{h: sha256.New()} }

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

func (c *counter) sum() v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", c.h.Sum(nil))}
}
