package sbom

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/uuid"
)

// MediaType is the media type of the encoded document (an OCI artifact's artifactType).
const MediaType = "application/vnd.cyclonedx+json"

// Subject is what the bill of materials describes: one image, all its platforms.
type Subject struct {
	// Name is the image's repository ("registry.example.com/stackwright/stackwright").
	Name string
	// Version is the release version; Digest the image index's digest, when known.
	Version, Digest string
	// Source and Revision say where the image was built from (a URL and a commit).
	Source, Revision string
	// Licenses are SPDX license expressions of the image as a whole.
	Licenses string
}

// Binary is one executable file of the image.
type Binary struct {
	// File is the binary on the build host; Path where the image holds it.
	File, Path string
	// Platform is the image platform it belongs to ("linux/arm64").
	Platform string
}

// Build returns the bill of materials of subject's binaries, created at created.
func Build(subject Subject, bins []Binary, created time.Time) (*cdx.BOM, error) {
	bom := cdx.NewBOM()
	bom.SerialNumber = "urn:uuid:" + uuid.NewSHA1(uuid.NameSpaceURL, []byte(subject.Name+"@"+subject.Version+"@"+subject.Digest)).String()
	meta := &cdx.Metadata{
		Timestamp: created.UTC().Format(time.RFC3339),
		Component: &cdx.Component{
			BOMRef:  subject.Name + "@" + subject.Version,
			Type:    cdx.ComponentTypeContainer,
			Name:    subject.Name,
			Version: subject.Version,
		},
	}
	if subject.Licenses != "" {
		meta.Component.Licenses = &cdx.Licenses{{Expression: subject.Licenses}}
	}
	var props []cdx.Property
	for _, p := range [][2]string{{"oci:digest", subject.Digest}, {"vcs:source", subject.Source}, {"vcs:revision", subject.Revision}} {
		if p[1] != "" {
			props = append(props, cdx.Property{Name: p[0], Value: p[1]})
		}
	}
	if len(props) > 0 {
		meta.Component.Properties = &props
	}
	bom.Metadata = meta

	components := make([]cdx.Component, 0, len(bins))
	deps := []cdx.Dependency{}
	top := make([]string, 0, len(bins))
	for _, b := range bins {
		c, d, err := binaryComponent(b)
		if err != nil {
			return nil, err
		}
		components = append(components, c)
		deps = append(deps, d)
		top = append(top, c.BOMRef)
	}
	bom.Components = &components
	deps = append([]cdx.Dependency{{Ref: meta.Component.BOMRef, Dependencies: &top}}, deps...)
	bom.Dependencies = &deps
	return bom, nil
}

// Encode writes bom as indented CycloneDX JSON.
func Encode(w io.Writer, bom *cdx.BOM) error {
	enc := cdx.NewBOMEncoder(w, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.Encode(bom); err != nil {
		return fmt.Errorf("failed to encode the bill of materials: %w", err)
	}
	return nil
}

// binaryComponent reads b's build info: the binary as an application whose components are
// the modules linked into it, and the dependency entry that says so.
func binaryComponent(b Binary) (cdx.Component, cdx.Dependency, error) {
	info, err := buildinfo.ReadFile(b.File)
	if err != nil {
		return cdx.Component{}, cdx.Dependency{}, fmt.Errorf("failed to read the Go build info of %s: %w", b.File, err)
	}
	sum, err := fileSHA256(b.File)
	if err != nil {
		return cdx.Component{}, cdx.Dependency{}, err
	}
	ref := b.Platform + ":" + b.Path
	main := mainModule(info)
	c := cdx.Component{
		BOMRef:     ref,
		Type:       cdx.ComponentTypeApplication,
		Name:       path.Base(b.Path),
		Version:    main.Version,
		PackageURL: purl(main.Path, main.Version),
		Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: sum}},
	}
	props := []cdx.Property{
		{Name: "oci:platform", Value: b.Platform},
		{Name: "oci:path", Value: b.Path},
		{Name: "go:module", Value: main.Path},
		{Name: "go:package", Value: info.Path},
		{Name: "go:version", Value: info.GoVersion},
	}
	if info.Main.Path != main.Path {
		props = append(props, cdx.Property{Name: "go:build-module", Value: info.Main.Path})
	}
	for _, s := range info.Settings {
		// What the binary was built from and for; other settings (flags, tags) say little
		// about what it contains.
		switch s.Key {
		case "vcs.revision", "vcs.modified", "GOOS", "GOARCH", "CGO_ENABLED":
			props = append(props, cdx.Property{Name: "go:build:" + s.Key, Value: s.Value})
		}
	}
	c.Properties = &props

	mods := make([]cdx.Component, 0, len(info.Deps))
	refs := make([]string, 0, len(info.Deps))
	for _, d := range info.Deps {
		m := module(d)
		mref := ref + "|" + m.Path + "@" + m.Version
		mc := cdx.Component{
			BOMRef:     mref,
			Type:       cdx.ComponentTypeLibrary,
			Name:       m.Path,
			Version:    m.Version,
			PackageURL: purl(m.Path, m.Version),
		}
		if m.Sum != "" {
			mc.Properties = &[]cdx.Property{{Name: "go:sum", Value: m.Sum}}
		}
		if d.Replace != nil {
			p := append(deref(mc.Properties), cdx.Property{Name: "go:replaces", Value: d.Path + "@" + d.Version})
			mc.Properties = &p
		}
		mods = append(mods, mc)
		refs = append(refs, mref)
	}
	slices.SortFunc(mods, func(a, b cdx.Component) int { return strings.Compare(a.BOMRef, b.BOMRef) })
	slices.Sort(refs)
	if len(mods) > 0 {
		c.Components = &mods
	}
	return c, cdx.Dependency{Ref: ref, Dependencies: &refs}, nil
}

// mainModule is the module the binary's main package comes from. For a binary built from
// its own module that is the main module; for a tool built through a wrapper module that
// only requires it (hack/tools/<tool>, whose main module is "(devel)"), it is the
// dependency whose path is the longest prefix of the main package's.
func mainModule(info *buildinfo.BuildInfo) *debug.Module {
	if inModule(info.Path, info.Main.Path) {
		return module(&info.Main)
	}
	var best *debug.Module
	for _, d := range info.Deps {
		if inModule(info.Path, d.Path) && (best == nil || len(d.Path) > len(best.Path)) {
			best = d
		}
	}
	if best == nil {
		return module(&info.Main)
	}
	return module(best)
}

// inModule says whether package pkg belongs to module mod (by path).
func inModule(pkg, mod string) bool {
	return mod != "" && (pkg == mod || strings.HasPrefix(pkg, mod+"/"))
}

// module is the module actually linked: the replacement, when there is one.
func module(m *debug.Module) *debug.Module {
	if m.Replace != nil {
		return m.Replace
	}
	return m
}

func deref(p *[]cdx.Property) []cdx.Property {
	if p == nil {
		return nil
	}
	return *p
}

// purl is the package URL of a Go module (github.com/package-url/purl-spec, type golang):
// each path segment and the version percent-encoded. A module without a version (a local
// replacement, "(devel)") has none.
func purl(modPath, version string) string {
	segs := strings.Split(modPath, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	p := "pkg:golang/" + strings.Join(segs, "/")
	if version != "" && version != "(devel)" {
		p += "@" + url.PathEscape(version)
	}
	return p
}

func fileSHA256(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("failed to open %s: %w", file, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("failed to hash %s: %w", file, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
