package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/stackwright/stackwright/internal/image"
)

// plugins builds a plugin bundle from a directory of plugins and pushes it: what a
// platform team runs to offer runner Pods providers a release does not ship.
func plugins(args []string) error {
	flags := flag.NewFlagSet("images plugins", flag.ContinueOnError)
	from := flags.String("from", "", "directory of plugins: static pulumi-* binaries, or what `pulumi plugin install` wrote (resource-<name>-v<version>/ directories)")
	ref := flags.String("ref", "", "image reference to push to, e.g. registry.example.com/platform/plugins:aws-6")
	plainHTTP := flags.Bool("plain-http", false, "talk to the registry over plain HTTP")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *from == "" || *ref == "" {
		return errors.New("--from and --ref are required")
	}
	var nameOpts []name.Option
	if *plainHTTP {
		nameOpts = append(nameOpts, name.Insecure)
	}
	tag, err := name.ParseReference(*ref, nameOpts...)
	if err != nil {
		return fmt.Errorf("--ref %q: %w", *ref, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// Layers are built under dist/, not /tmp, as the other images' are: a provider is
	// hundreds of megabytes and /tmp may be a small tmpfs.
	if err := os.MkdirAll("dist", 0o755); err != nil {
		return err
	}
	digest, err := pushPlugins(ctx, *from, "dist", tag, runtime.GOARCH, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s\n  --plugin-bundle <name>=%s@%s\n", tag, tag.Context(), digest)
	return nil
}

// pushPlugins builds the bundle of the plugins in dir for arch, its layers in a scratch
// directory under work, and pushes it to ref as an index of one platform; it returns the
// index's digest.
func pushPlugins(ctx context.Context, dir, work string, ref name.Reference, arch string, opts ...remote.Option) (string, error) {
	files, err := pluginFiles(dir, arch)
	if err != nil {
		return "", err
	}
	epoch, err := image.SourceDateEpoch()
	if err != nil {
		return "", err
	}
	scratch, err := os.MkdirTemp(work, ".layers-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	b := image.NewBuilder(scratch, epoch)
	img, err := b.Build(image.Spec{
		Ref: ref.String(), Arch: arch, Files: files, User: nonrootUser,
		Labels: labels("stackwright-plugins", ref.Identifier(), "Pulumi plugins for Stackwright's runner Pods, mounted as an image volume"),
	})
	if err != nil {
		return "", err
	}
	idx, err := image.Index([]image.Image{img}, nil)
	if err != nil {
		return "", err
	}
	desc, err := image.PushIndex(ctx, ref, idx, opts...)
	if err != nil {
		return "", err
	}
	return desc.Digest.String(), nil
}

// pluginFiles are the regular files below dir at the same paths in the image: plugins
// (pulumi-*) executable by anyone and checked to be static binaries for arch, the rest
// readable. The CLI's own bookkeeping of an install (*.lock files, *.partial markers of
// an install that did not finish) is left out, and so is a plugin whose install did not
// finish.
func pluginFiles(dir, arch string) ([]image.File, error) {
	var files []image.File
	plugins := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if _, err := os.Stat(path + ".partial"); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasSuffix(rel, ".lock") || strings.HasSuffix(rel, ".partial") {
			return nil
		}
		mode := fs.FileMode(0o644)
		if strings.HasPrefix(d.Name(), "pulumi-") {
			if err := checkStaticFor(path, arch); err != nil {
				return err
			}
			mode = 0o755
			plugins++
		}
		files = append(files, image.File{Source: path, Path: "/" + filepath.ToSlash(rel), Mode: mode})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if plugins == 0 {
		return nil, fmt.Errorf("no plugin (pulumi-* file) found in %s", dir)
	}
	return files, nil
}
