package image

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image is a built image and the reference it is to be stored under.
type Image struct {
	Ref name.Tag
	v1.Image
}

// Builder turns Specs into images. Compressed layers are spooled to files in a scratch
// directory the caller owns and removes after the images are written; they are not kept
// in memory because the engine binaries make layers of hundreds of megabytes.
//
// A Builder reuses a layer when a later Spec asks for the same entries (the base layer
// always, the files layer of images that ship the same binaries), so sources are taken to
// be unchanged while it is in use. It is not safe for concurrent use.
type Builder struct {
	// CABundle is copied into the base layer when it exists; empty leaves it out.
	CABundle string

	scratch string
	epoch   time.Time
	layers  map[string]v1.Layer
}

// NewBuilder returns a Builder that writes layers under scratch and stamps the images'
// creation time and history with epoch (see SourceDateEpoch); files in layers carry the
// Unix epoch whatever epoch is.
func NewBuilder(scratch string, epoch time.Time) *Builder {
	return &Builder{
		CABundle: HostCABundle,
		scratch:  scratch,
		epoch:    epoch.UTC(),
		layers:   map[string]v1.Layer{},
	}
}

// SourceDateEpoch is the time reproducible builds agree on: $SOURCE_DATE_EPOCH
// (https://reproducible-builds.org/specs/source-date-epoch/) when set, else the Unix epoch,
// so that no build ever depends on the clock.
func SourceDateEpoch() (time.Time, error) {
	v, ok := os.LookupEnv("SOURCE_DATE_EPOCH")
	if !ok || v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil || secs < 0 {
		return time.Time{}, fmt.Errorf("failed to parse SOURCE_DATE_EPOCH %q: want non-negative seconds since the Unix epoch", v)
	}
	return time.Unix(secs, 0).UTC(), nil
}

// Build builds the image s declares: the base layer, then one layer of s's files and
// directories, for linux on the architecture this program was built for.
func (b *Builder) Build(s Spec) (Image, error) {
	img, err := b.build(s)
	if err != nil {
		return Image{}, fmt.Errorf("failed to build image %s: %w", s.Ref, err)
	}
	return img, nil
}

func (b *Builder) build(s Spec) (Image, error) {
	// Strict: containerd does not default registries or tags, so an image imported as
	// "stackwright" would never match a pod's "stackwright:latest".
	ref, err := name.NewTag(s.Ref, name.StrictValidation)
	if err != nil {
		return Image{}, fmt.Errorf("failed to parse reference: %w", err)
	}
	baseEntries, err := baseEntries(b.CABundle)
	if err != nil {
		return Image{}, err
	}
	lowerEntries, err := specEntries(Spec{Files: s.Lower}, baseEntries)
	if err != nil {
		return Image{}, err
	}
	fileEntries, err := specEntries(s, append(slices.Clone(baseEntries), lowerEntries...))
	if err != nil {
		return Image{}, err
	}
	created := v1.Time{Time: b.epoch}
	adds := make([]mutate.Addendum, 0, 3)
	for _, l := range []struct {
		what    string
		entries []entry
	}{{"base", baseEntries}, {"lower", lowerEntries}, {"files", fileEntries}} {
		if len(l.entries) == 0 {
			continue
		}
		layer, err := b.layer(l.entries)
		if err != nil {
			return Image{}, err
		}
		adds = append(adds, mutate.Addendum{
			Layer:   layer,
			History: v1.History{Created: created, CreatedBy: "stackwright internal/image: " + l.what, Comment: l.what},
		})
	}

	// OCI rather than empty.Image's Docker media types: the archive is an OCI layout.
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, adds...)
	if err != nil {
		return Image{}, fmt.Errorf("failed to append layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return Image{}, fmt.Errorf("failed to read config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS = "linux"
	cf.Architecture = cmp.Or(s.Arch, runtime.GOARCH)
	cf.Config = v1.Config{
		User:       s.User,
		Env:        s.Env,
		Entrypoint: s.Entrypoint,
		Cmd:        s.Cmd,
		WorkingDir: s.WorkingDir,
		Labels:     s.Labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return Image{}, fmt.Errorf("failed to set config: %w", err)
	}
	if len(s.Annotations) > 0 {
		img = mutate.Annotations(img, s.Annotations).(v1.Image)
	}
	return Image{Ref: ref, Image: img}, nil
}

// layer writes entries as a layer, or returns the layer already written for equal entries.
func (b *Builder) layer(entries []entry) (v1.Layer, error) {
	entries = sortedEntries(entries)
	key, err := layerKey(entries)
	if err != nil {
		return nil, err
	}
	if l, ok := b.layers[key]; ok {
		return l, nil
	}
	// Layer entries carry the Unix epoch, not b.epoch: a layer's digest then depends on its
	// files alone, so a release whose engine did not change reuses the engine's layer
	// (stored once in a registry, pulled once by a node) although its time is another.
	l, err := writeLayer(b.scratch, time.Unix(0, 0).UTC(), entries)
	if err != nil {
		return nil, err
	}
	b.layers[key] = l
	return l, nil
}

// layerKey identifies a layer's content without reading source files: by their name, size
// and modification time, which is enough within one Builder's life.
func layerKey(entries []entry) (string, error) {
	h := sha256.New()
	for _, e := range entries {
		fmt.Fprintf(h, "%q %t %o %d %d %x", e.name, e.dir, uint32(e.mode), e.uid, e.gid, sha256.Sum256(e.data))
		if e.source != "" {
			info, err := os.Stat(e.source)
			if err != nil {
				return "", fmt.Errorf("failed to add /%s: %w", e.name, err)
			}
			fmt.Fprintf(h, " %q %d %d", e.source, info.Size(), info.ModTime().UnixNano())
		}
		fmt.Fprintln(h)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
