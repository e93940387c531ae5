package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations on an index entry that name the image on import. containerd reads the first
// and falls back to the second; other OCI tools (skopeo, podman, crane) read only the
// second, which by the image-layout spec is just the tag.
const (
	AnnotationContainerdName = "io.containerd.image.name"
	AnnotationRefName        = "org.opencontainers.image.ref.name"
)

// Archive describes a written image archive.
type Archive struct {
	Path   string
	Digest v1.Hash // of the archive file
	Size   int64
}

// WriteArchive writes images into one OCI image-layout tar archive at path: oci-layout,
// an index.json with one entry per image named by both annotations, and every blob once,
// however many images share it. The archive replaces path atomically, so a reader never
// sees a partial one.
//
// Its entries carry the Unix epoch as mtime: they are a transport, and the time that
// belongs to the content is already inside the layers and configs.
func WriteArchive(path string, images ...Image) (Archive, error) {
	a, err := writeArchive(path, images)
	if err != nil {
		return Archive{}, fmt.Errorf("failed to write image archive %s: %w", path, err)
	}
	return a, nil
}

// blob is one file under blobs/sha256/.
type blob struct {
	size int64
	data []byte                        // manifests and configs
	open func() (io.ReadCloser, error) // layers
}

func writeArchive(path string, images []Image) (Archive, error) {
	if len(images) == 0 {
		return Archive{}, fmt.Errorf("no images")
	}
	blobs := map[v1.Hash]blob{}
	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	refs := map[string]bool{}
	for _, img := range images {
		ref := img.Ref.String()
		if refs[ref] {
			return Archive{}, fmt.Errorf("image %s listed twice", ref)
		}
		refs[ref] = true
		desc, err := addImage(blobs, img)
		if err != nil {
			return Archive{}, fmt.Errorf("failed to add image %s: %w", ref, err)
		}
		index.Manifests = append(index.Manifests, desc)
	}
	rawIndex, err := json.Marshal(index)
	if err != nil {
		return Archive{}, fmt.Errorf("failed to encode index: %w", err)
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return Archive{}, fmt.Errorf("failed to create directory: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return Archive{}, fmt.Errorf("failed to create file: %w", err)
	}
	defer func() {
		if f != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()

	sum := newCounter()
	buf := bufio.NewWriterSize(io.MultiWriter(f, sum), 1<<20)
	tw := tar.NewWriter(buf)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", rawIndex},
	}
	for _, file := range files {
		if err := writeArchiveEntry(tw, file.name, int64(len(file.data)), bytes.NewReader(file.data)); err != nil {
			return Archive{}, err
		}
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
			return Archive{}, fmt.Errorf("failed to write %s: %w", dir, err)
		}
	}
	digests := make([]v1.Hash, 0, len(blobs))
	for d := range blobs {
		digests = append(digests, d)
	}
	slices.SortFunc(digests, func(a, b v1.Hash) int { return strings.Compare(a.String(), b.String()) })
	for _, d := range digests {
		if err := writeBlob(tw, d, blobs[d]); err != nil {
			return Archive{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return Archive{}, fmt.Errorf("failed to finish archive: %w", err)
	}
	if err := buf.Flush(); err != nil {
		return Archive{}, fmt.Errorf("failed to write archive: %w", err)
	}
	if err := f.Chmod(0o644); err != nil {
		return Archive{}, fmt.Errorf("failed to set archive mode: %w", err)
	}
	if err := f.Close(); err != nil {
		return Archive{}, fmt.Errorf("failed to write archive: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return Archive{}, fmt.Errorf("failed to rename archive: %w", err)
	}
	f = nil
	return Archive{Path: path, Digest: sum.sum(), Size: sum.n}, nil
}

// addImage records img's manifest, config and layers in blobs and returns its index entry.
func addImage(blobs map[v1.Hash]blob, img Image) (v1.Descriptor, error) {
	manifest, err := img.RawManifest()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("failed to read manifest: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("failed to hash manifest: %w", err)
	}
	mediaType, err := img.MediaType()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("failed to read media type: %w", err)
	}
	blobs[digest] = blob{size: int64(len(manifest)), data: manifest}

	config, err := img.RawConfigFile()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("failed to read config: %w", err)
	}
	configName, err := img.ConfigName()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("failed to hash config: %w", err)
	}
	blobs[configName] = blob{size: int64(len(config)), data: config}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("failed to read config: %w", err)
	}

	layers, err := img.Layers()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("failed to list layers: %w", err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("failed to hash layer: %w", err)
		}
		size, err := l.Size()
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("failed to size layer %s: %w", d, err)
		}
		blobs[d] = blob{size: size, open: l.Compressed}
	}

	// The index entry carries the platform so that importers filtering by platform (ctr
	// imports only the host's by default) need not open the config to decide.
	return v1.Descriptor{
		MediaType: mediaType,
		Size:      int64(len(manifest)),
		Digest:    digest,
		Platform:  &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant},
		Annotations: map[string]string{
			AnnotationContainerdName: containerdName(img.Ref),
			AnnotationRefName:        img.Ref.TagStr(),
		},
	}, nil
}

// containerdName is the name containerd, and so the kubelet, gives ref. Docker Hub is
// "docker.io" there, where go-containerregistry writes "index.docker.io": an image imported
// under the latter would never match a Pod's "pulumi/pulumi:tag".
func containerdName(ref name.Tag) string {
	if ref.RegistryStr() == name.DefaultRegistry {
		return "docker.io/" + ref.RepositoryStr() + ":" + ref.TagStr()
	}
	return ref.String()
}

func writeBlob(tw *tar.Writer, d v1.Hash, b blob) error {
	name := "blobs/" + d.Algorithm + "/" + d.Hex
	if b.open == nil {
		return writeArchiveEntry(tw, name, b.size, bytes.NewReader(b.data))
	}
	rc, err := b.open()
	if err != nil {
		return fmt.Errorf("failed to open blob %s: %w", d, err)
	}
	defer rc.Close()
	return writeArchiveEntry(tw, name, b.size, rc)
}

func writeArchiveEntry(tw *tar.Writer, name string, size int64, r io.Reader) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("failed to write %s: %w", name, err)
	}
	if n, err := io.Copy(tw, r); err != nil {
		return fmt.Errorf("failed to write %s: %w", name, err)
	} else if n != size {
		return fmt.Errorf("failed to write %s: got %d bytes, want %d", name, n, size)
	}
	return nil
}
