package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"path"
	"slices"
	"time"
)

// Pack builds a tar.gz of files (slash-separated relative path -> content) whose bytes
// depend only on the map's content: names sorted, regular files 0644 with zero owner and
// epoch mtime, no directory entries (Extract creates them), and a gzip header without
// name or time. Equal inputs therefore share one digest and one stored artifact.
//
// The bytes also depend on the Go release's compress/flate, which has been stable for
// years; a change there would change digests once, not correctness.
func Pack(files map[string][]byte) ([]byte, error) {
	names := make([]string, 0, len(files))
	for name := range files {
		if err := checkPackName(name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if _, ok := files[dir]; ok {
				return nil, fmt.Errorf("failed to pack %q: %q is a file, not a directory", name, dir)
			}
		}
	}

	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, fmt.Errorf("failed to create gzip writer: %w", err)
	}
	tw := tar.NewWriter(zw)
	for _, name := range names {
		content := files[name]
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     name,
			Mode:     0o644,
			Size:     int64(len(content)),
			ModTime:  time.Unix(0, 0),
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("failed to pack %q: %w", name, err)
		}
		if _, err := tw.Write(content); err != nil {
			return nil, fmt.Errorf("failed to pack %q: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("failed to finish archive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("failed to finish archive: %w", err)
	}
	return buf.Bytes(), nil
}

// checkPackName accepts exactly the names Extract would accept unchanged, so that what is
// packed is what gets extracted.
func checkPackName(name string) error {
	clean, err := cleanName(name)
	if err == nil && (clean != name || clean == ".") {
		err = fmt.Errorf("name is not a clean relative path (want %q)", clean)
	}
	if err != nil {
		return fmt.Errorf("failed to pack %q: %w", name, err)
	}
	return nil
}
