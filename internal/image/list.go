package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// ListFiles returns, for each image of the OCI archive at path (by the name containerd
// imports it as), the absolute paths of every entry its layers hold, as `crane export |
// tar t` would list them. It is how a test proves what an image ships.
func ListFiles(path string) (map[string][]string, error) {
	dir, err := os.MkdirTemp(filepath.Dir(path), ".list-")
	if err != nil {
		return nil, fmt.Errorf("failed to create scratch directory: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := untar(path, dir); err != nil {
		return nil, fmt.Errorf("failed to unpack image archive %s: %w", path, err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("failed to read image archive %s: %w", path, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("failed to read index of %s: %w", path, err)
	}
	out := map[string][]string{}
	for _, d := range m.Manifests {
		ref := d.Annotations[AnnotationContainerdName]
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("failed to read image %s of %s: %w", ref, path, err)
		}
		layers, err := img.Layers()
		if err != nil {
			return nil, fmt.Errorf("failed to read layers of %s: %w", ref, err)
		}
		for _, l := range layers {
			rc, err := l.Uncompressed()
			if err != nil {
				return nil, fmt.Errorf("failed to open a layer of %s: %w", ref, err)
			}
			names, err := tarNames(rc)
			_ = rc.Close()
			if err != nil {
				return nil, fmt.Errorf("failed to list a layer of %s: %w", ref, err)
			}
			out[ref] = append(out[ref], names...)
		}
	}
	return out, nil
}

func tarNames(r io.Reader) ([]string, error) {
	var names []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, err
		}
		names = append(names, "/"+strings.Trim(h.Name, "/"))
	}
}

// untar unpacks an image archive, which holds only regular files and directories with
// plain relative names (oci-layout, index.json, blobs/sha256/...).
func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("entry %q leaves the archive", h.Name)
		}
		target := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q is not a regular file or directory", h.Name)
		}
	}
}
