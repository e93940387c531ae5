package image

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// The base layer's unprivileged account, numbered as in distroless so that manifests
// written for distroless images (runAsUser: 65532) keep working.
const (
	NonrootUID = 65532
	NonrootGID = 65532
)

// Spec declares an image.
type Spec struct {
	// Ref names the image, with an explicit registry and tag ("localhost/stackwright:v0.1.0").
	// containerd keeps images under their full reference and the kubelet looks them up by
	// it, so nothing is defaulted the way `docker` would.
	Ref string
	// Arch is the GOARCH the image is for (its binaries are checked by the caller); empty
	// means this program's.
	Arch string
	// Lower are files that change less often than Files (the engine), copied into a layer
	// of their own between the base and Files, so that a release that changes only Files
	// reuses it: a registry stores it once and a node pulls it once. Optional.
	Lower []File
	// Files are copied into one layer above the base (and Lower), owned by root. Missing
	// parent directories are created (0755, root) unless a layer below has them.
	Files []File
	// Dirs are created in the same layer as Files.
	Dirs []Dir

	// User is "uid:gid". Numeric, because the kubelet enforces runAsNonRoot only for
	// images whose user it can see is not 0 without looking inside them.
	User       string
	Env        []string
	Entrypoint []string
	Cmd        []string
	WorkingDir string
	Labels     map[string]string
	// Annotations are set on the image manifest (OCI's org.opencontainers.image.* keys, which
	// registries and scanners read without pulling the config).
	Annotations map[string]string
}

// File copies a regular file from the build host into the image.
type File struct {
	Source string      // path on the build host
	Path   string      // absolute path in the image
	Mode   fs.FileMode // permission bits; zero means 0644
}

// Dir creates a directory in the image.
type Dir struct {
	Path     string      // absolute path in the image
	Mode     fs.FileMode // permission bits, plus fs.ModeSticky, fs.ModeSetuid or fs.ModeSetgid; zero means 0755
	UID, GID int
}

// entry is one tar entry of a layer; the zero owner is root. Files take their content from
// data or, when set, from the host file source.
type entry struct {
	name     string // relative, clean, no trailing slash ("etc/passwd")
	dir      bool
	mode     fs.FileMode
	uid, gid int
	data     []byte
	source   string
}

const specialBits = fs.ModeSticky | fs.ModeSetuid | fs.ModeSetgid

// layerName turns an absolute image path into a tar entry name, refusing anything that
// would not name the same file after extraction ("..", "//", relative paths).
func layerName(p string) (string, error) {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return "", fmt.Errorf("invalid image path %q: must be absolute, clean and not /", p)
	}
	return strings.TrimPrefix(p, "/"), nil
}

// specEntries lists the files layer of s: its Files and Dirs plus the missing parent
// directories. A parent the base layer already has is repeated with the base's mode and
// owner, since an upper layer's directory entry replaces the lower one's metadata and
// would otherwise reset, say, /tmp's sticky bit.
func specEntries(s Spec, base []entry) ([]entry, error) {
	byName := make(map[string]entry, len(s.Files)+len(s.Dirs))
	add := func(e entry) error {
		if _, ok := byName[e.name]; ok {
			return fmt.Errorf("failed to add /%s: listed twice", e.name)
		}
		byName[e.name] = e
		return nil
	}
	for _, f := range s.Files {
		name, err := layerName(f.Path)
		if err != nil {
			return nil, err
		}
		if f.Source == "" {
			return nil, fmt.Errorf("failed to add %s: no source file", f.Path)
		}
		if f.Mode&^(fs.ModePerm|specialBits) != 0 {
			return nil, fmt.Errorf("failed to add %s: mode %v is not a regular file's", f.Path, f.Mode)
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := add(entry{name: name, mode: mode, source: f.Source}); err != nil {
			return nil, err
		}
	}
	for _, d := range s.Dirs {
		name, err := layerName(d.Path)
		if err != nil {
			return nil, err
		}
		if d.Mode&^(fs.ModePerm|specialBits|fs.ModeDir) != 0 {
			return nil, fmt.Errorf("failed to add %s: mode %v is not a directory's", d.Path, d.Mode)
		}
		mode := d.Mode &^ fs.ModeDir
		if mode == 0 {
			mode = 0o755
		}
		if err := add(entry{name: name, dir: true, mode: mode, uid: d.UID, gid: d.GID}); err != nil {
			return nil, err
		}
	}

	baseDirs := make(map[string]entry, len(base))
	for _, e := range base {
		if e.dir {
			baseDirs[e.name] = e
		}
	}
	entries := make([]entry, 0, len(byName))
	for _, e := range byName {
		entries = append(entries, e)
	}
	for _, e := range entries {
		for dir := path.Dir(e.name); dir != "."; dir = path.Dir(dir) {
			if parent, ok := byName[dir]; ok {
				if !parent.dir {
					return nil, fmt.Errorf("failed to add /%s: /%s is a file, not a directory", e.name, dir)
				}
				continue
			}
			parent, ok := baseDirs[dir]
			if !ok {
				parent = entry{name: dir, dir: true, mode: 0o755}
			}
			byName[dir] = parent
		}
	}
	entries = entries[:0]
	for _, e := range byName {
		entries = append(entries, e)
	}
	return entries, nil
}
