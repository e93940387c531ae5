package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Index makes one OCI image index of images, each entry carrying its image's platform
// (linux and the config's architecture), with annotations on the index itself.
func Index(images []Image, annotations map[string]string) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	adds := make([]mutate.IndexAddendum, 0, len(images))
	seen := map[string]bool{}
	for _, img := range images {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("failed to read the config of %s: %w", img.Ref, err)
		}
		p := v1.Platform{OS: cf.OS, Architecture: cf.Architecture}
		if seen[p.String()] {
			return nil, fmt.Errorf("failed to make an index: two images for %s", p.String())
		}
		seen[p.String()] = true
		adds = append(adds, mutate.IndexAddendum{Add: img.Image, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx = mutate.AppendManifests(idx, adds...)
	if len(annotations) > 0 {
		idx = mutate.Annotations(idx, annotations).(v1.ImageIndex)
	}
	return idx, nil
}

// PushIndex uploads idx, its images and their blobs to ref (blobs the registry already has
// are not sent again) and returns the index's descriptor.
func PushIndex(ctx context.Context, ref name.Reference, idx v1.ImageIndex, opts ...remote.Option) (v1.Descriptor, error) {
	if err := remote.WriteIndex(ref, idx, append(opts, remote.WithContext(ctx))...); err != nil {
		return v1.Descriptor{}, fmt.Errorf("failed to push %s: %w", ref, err)
	}
	d, err := descriptorOf(idx)
	if err != nil {
		return v1.Descriptor{}, err
	}
	return d, nil
}

func descriptorOf(idx v1.ImageIndex) (v1.Descriptor, error) {
	digest, err := idx.Digest()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("failed to hash the index: %w", err)
	}
	size, err := idx.Size()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("failed to size the index: %w", err)
	}
	mt, err := idx.MediaType()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("failed to read the index's media type: %w", err)
	}
	return v1.Descriptor{MediaType: mt, Digest: digest, Size: size}, nil
}

// emptyConfig is OCI's empty JSON blob, the config of an artifact that has none.
var emptyConfig = []byte("{}")

// Artifact is a file pushed as an OCI artifact (image-spec 1.1): one blob, an empty config,
// its artifactType, and a subject it refers to, which lists it among its referrers.
type Artifact struct {
	// ArtifactType is the artifact's and its blob's media type.
	ArtifactType string
	// Data is the blob; Title its file name (org.opencontainers.image.title).
	Data  []byte
	Title string
	// Subject is the manifest the artifact is about.
	Subject v1.Descriptor
	// Annotations go on the artifact's manifest.
	Annotations map[string]string
}

// PushArtifact uploads a's blobs and manifest and tags it tag. Registries that implement
// the referrers API index it under its subject themselves; for the others the fallback
// tag (sha256-<subject digest>) is updated, as the image spec says.
func PushArtifact(ctx context.Context, tag name.Tag, a Artifact, opts ...remote.Option) (v1.Hash, error) {
	opts = append(opts, remote.WithContext(ctx), remote.WithReferrersTagFallback(true))
	blob := static.NewLayer(a.Data, types.MediaType(a.ArtifactType))
	config := static.NewLayer(emptyConfig, types.MediaType("application/vnd.oci.empty.v1+json"))
	for _, l := range []v1.Layer{config, blob} {
		if err := remote.WriteLayer(tag.Repository, l, opts...); err != nil {
			return v1.Hash{}, fmt.Errorf("failed to push a blob of %s: %w", tag, err)
		}
	}
	subject := a.Subject
	raw, err := json.Marshal(v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  a.ArtifactType,
		Config:        blobDescriptor("application/vnd.oci.empty.v1+json", emptyConfig, nil),
		Layers: []v1.Descriptor{blobDescriptor(a.ArtifactType, a.Data,
			map[string]string{"org.opencontainers.image.title": a.Title})},
		Subject:     &subject,
		Annotations: a.Annotations,
	})
	if err != nil {
		return v1.Hash{}, fmt.Errorf("failed to encode the manifest of %s: %w", tag, err)
	}
	m := rawManifest{raw: raw, mediaType: types.OCIManifestSchema1}
	if err := remote.Put(tag, m, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("failed to push %s: %w", tag, err)
	}
	sum := sha256.Sum256(raw)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}, nil
}

func blobDescriptor(mediaType string, data []byte, annotations map[string]string) v1.Descriptor {
	sum := sha256.Sum256(data)
	d := v1.Descriptor{
		MediaType:   types.MediaType(mediaType),
		Digest:      v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])},
		Size:        int64(len(data)),
		Annotations: annotations,
	}
	if bytes.Equal(data, emptyConfig) {
		d.Data = emptyConfig
	}
	return d
}

// rawManifest is a manifest pushed as the bytes given, with its media type.
type rawManifest struct {
	raw       []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }
