package artifact

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
)

var (
	// ErrUnsafeEntry: an archive entry would write or point outside the target directory, or
	// is of a kind that is never extracted (hard links, devices, FIFOs).
	ErrUnsafeEntry = errors.New("unsafe archive entry")
	// ErrLimitExceeded: the archive unpacks to more bytes or entries than Limits allows.
	ErrLimitExceeded = errors.New("archive limit exceeded")
)

// Limits bound what one extraction may create. A zero field takes its DefaultLimits value.
type Limits struct {
	// MaxBytes caps the bytes written into regular files, counted as they are written.
	MaxBytes int64
	// MaxFiles caps the filesystem entries created: files, symlinks and directories,
	// including the parent directories an entry implies.
	MaxFiles int
}

// DefaultLimits fit any Pulumi program we expect, vendored dependencies included.
var DefaultLimits = Limits{MaxBytes: 100 << 20, MaxFiles: 10000}

const (
	// maxNameLen is PATH_MAX; it also bounds the directories one entry can imply.
	maxNameLen = 4096
	// perEntryOverhead is what tar spends on an entry besides its data (header, padding,
	// PAX records for long names). The decompressed stream is capped at MaxBytes plus this
	// per allowed entry, so entries whose data is skipped (tar discards it for
	// header-only types) and endless PAX headers cannot make a small gzip expand forever.
	perEntryOverhead = 8 << 10
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultLimits.MaxFiles
	}
	return l
}

// Extract unpacks the gzip-compressed tar stream r into dir, which is created when absent
// and must be an empty directory otherwise. On failure dir is emptied again (and removed
// if Extract created it), so a caller never runs a half-extracted program.
//
// Archives are untrusted. Extract refuses: absolute names, names with a ".." component or
// a NUL byte, names longer than 4096 bytes; hard links; device, FIFO and other special
// entries; symlinks whose target is absolute, or climbs out of the target directory, or
// uses ".." after a normal component (which, through another symlink, could climb
// further than it appears to); any entry below a symlink (so a symlink from an earlier
// entry is never followed when writing a later one); any entry whose path already exists
// as a file or symlink. Directories in the archive, and those its names imply, are created
// 0755; regular files 0644, or 0755 when the archive marks them executable. Bytes and
// entries are counted while streaming against lim; header sizes are not trusted.
func Extract(r io.Reader, dir string, lim Limits) error {
	return extract(r, dir, lim, nil)
}

// extract is Extract with a check that runs after the archive has been unpacked and before
// success is reported; its failure undoes the extraction like any other.
func extract(r io.Reader, dir string, lim Limits, finish func() error) (err error) {
	created, err := prepareDir(dir)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return errors.Join(fmt.Errorf("failed to open extraction directory: %w", err), clean(dir, created))
	}
	defer func() {
		_ = root.Close()
		if err != nil {
			if cerr := clean(dir, created); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()
	x := &extractor{root: root, lim: lim.withDefaults(), dirs: map[string]bool{".": true}}
	if err := x.run(r); err != nil {
		return err
	}
	if finish != nil {
		return finish()
	}
	return nil
}

func prepareDir(dir string) (created bool, err error) {
	// Stat, not Lstat: dir itself is the caller's choice and may legitimately be a symlink.
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return false, fmt.Errorf("failed to create extraction directory: %w", err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to inspect extraction directory: %w", err)
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("failed to extract into %s: not a directory", dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return false, fmt.Errorf("failed to open extraction directory: %w", err)
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return false, fmt.Errorf("failed to extract into %s: directory is not empty", dir)
	}
	return false, nil
}

// clean undoes a failed extraction. RemoveAll does not follow symlinks, so links the
// archive created cannot redirect the cleanup either.
func clean(dir string, created bool) error {
	if created {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("failed to clean up extraction directory: %w", err)
		}
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("failed to clean up extraction directory: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("failed to clean up extraction directory: %w", err)
		}
	}
	return nil
}

type extractor struct {
	// root confines every operation to the target directory even if a check below were
	// wrong: os.Root refuses paths and symlinks that resolve outside it.
	root    *os.Root
	lim     Limits
	files   int
	written int64
	// dirs are the directories this extraction created or found as real directories.
	// Nothing else writes into the target while we do and entries are never replaced, so
	// a path in dirs stays a real directory.
	dirs map[string]bool
}

func (x *extractor) run(r io.Reader) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("failed to read archive: %w", err)
	}
	defer zr.Close()
	overhead := int64(math.MaxInt64)
	if int64(x.lim.MaxFiles) <= math.MaxInt64/perEntryOverhead {
		overhead = satAdd(int64(x.lim.MaxFiles)*perEntryOverhead, 1<<20)
	}
	stream := &capReader{r: zr, left: satAdd(x.lim.MaxBytes, overhead)}
	tr := tar.NewReader(stream)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("failed to read archive: %w", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return err
		}
	}
	// Reading to the end of the gzip stream verifies its checksum; the cap still applies.
	if _, err := io.Copy(io.Discard, stream); err != nil {
		return fmt.Errorf("failed to read archive: %w", err)
	}
	return nil
}

func (x *extractor) entry(hdr *tar.Header, data io.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		// Metadata for the whole archive (git archive stores the commit here); no file.
		return nil
	}
	name, err := cleanName(hdr.Name)
	if err != nil {
		return unsafe(hdr.Name, err.Error())
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.mkdirAll(name, hdr.Name)
	case tar.TypeReg:
		return x.file(name, hdr, data)
	case tar.TypeSymlink:
		return x.symlink(name, hdr)
	case tar.TypeLink:
		return unsafe(hdr.Name, "hard links are not extracted")
	case tar.TypeChar, tar.TypeBlock:
		return unsafe(hdr.Name, "device nodes are not extracted")
	case tar.TypeFifo:
		return unsafe(hdr.Name, "FIFOs are not extracted")
	default:
		return unsafe(hdr.Name, fmt.Sprintf("entry type %q is not extracted", hdr.Typeflag))
	}
}

func (x *extractor) file(name string, hdr *tar.Header, data io.Reader) error {
	if name == "." {
		return unsafe(hdr.Name, "a file cannot replace the target directory")
	}
	if err := x.mkdirAll(path.Dir(name), hdr.Name); err != nil {
		return err
	}
	left := x.lim.MaxBytes - x.written
	if hdr.Size > left {
		return limit(hdr.Name, fmt.Sprintf("more than %d bytes", x.lim.MaxBytes))
	}
	if err := x.count(hdr.Name); err != nil {
		return err
	}
	perm := fs.FileMode(0o644)
	if hdr.Mode&0o100 != 0 {
		perm = 0o755
	}
	// O_EXCL never follows a symlink at the last component and fails on any existing
	// entry, so a duplicate cannot overwrite or write through an earlier one.
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, fs.ErrExist) {
		return unsafe(hdr.Name, "duplicate entry")
	}
	if err != nil {
		return fmt.Errorf("failed to create %q: %w", hdr.Name, err)
	}
	// The header's size is not trusted: count what actually arrives.
	n, err := io.Copy(f, io.LimitReader(data, satAdd(left, 1)))
	x.written += n
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("failed to write %q: %w", hdr.Name, err)
	}
	if n > left {
		return limit(hdr.Name, fmt.Sprintf("more than %d bytes", x.lim.MaxBytes))
	}
	return nil
}

func (x *extractor) symlink(name string, hdr *tar.Header) error {
	if name == "." {
		return unsafe(hdr.Name, "a symlink cannot replace the target directory")
	}
	if err := checkLinkTarget(name, hdr.Linkname); err != nil {
		return unsafe(hdr.Name, err.Error())
	}
	if err := x.mkdirAll(path.Dir(name), hdr.Name); err != nil {
		return err
	}
	if err := x.count(hdr.Name); err != nil {
		return err
	}
	err := x.root.Symlink(hdr.Linkname, name)
	if errors.Is(err, fs.ErrExist) {
		return unsafe(hdr.Name, "duplicate entry")
	}
	if err != nil {
		return fmt.Errorf("failed to create symlink %q: %w", hdr.Name, err)
	}
	return nil
}

// mkdirAll makes dir and its parents real directories, refusing to pass through anything
// else: a symlink from an earlier entry is never followed.
func (x *extractor) mkdirAll(dir, entry string) error {
	if x.dirs[dir] {
		return nil
	}
	if parent := path.Dir(dir); !x.dirs[parent] {
		if err := x.mkdirAll(parent, entry); err != nil {
			return err
		}
	}
	fi, err := x.root.Lstat(dir)
	switch {
	case err == nil && fi.IsDir():
	case err == nil:
		return unsafe(entry, fmt.Sprintf("%q is not a directory (a symlink or file from an earlier entry)", dir))
	case errors.Is(err, fs.ErrNotExist):
		if err := x.count(entry); err != nil {
			return err
		}
		if err := x.root.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("failed to create directory %q for %q: %w", dir, entry, err)
		}
	default:
		return fmt.Errorf("failed to inspect %q for %q: %w", dir, entry, err)
	}
	x.dirs[dir] = true
	return nil
}

func (x *extractor) count(entry string) error {
	x.files++
	if x.files > x.lim.MaxFiles {
		return limit(entry, fmt.Sprintf("more than %d entries", x.lim.MaxFiles))
	}
	return nil
}

// cleanName turns an archive name into a clean relative path ("." for the root itself).
// It refuses rather than repairs: an archive that names "../x" is hostile or broken.
func cleanName(name string) (string, error) {
	switch {
	case name == "":
		return "", errors.New("empty name")
	case len(name) > maxNameLen:
		return "", fmt.Errorf("name longer than %d bytes", maxNameLen)
	case strings.IndexByte(name, 0) >= 0:
		return "", errors.New("name contains a NUL byte")
	case strings.HasPrefix(name, "/"):
		return "", errors.New("absolute path")
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", errors.New(`path contains a ".." component`)
		}
	}
	return path.Clean(name), nil
}

// checkLinkTarget allows relative targets of the form ("../")*k + a path without "..",
// with k no deeper than the link's own directory. The leading ".." climb through the link's
// parents, which are real directories (mkdirAll guarantees it), so the climb lands where it
// appears to; the rest only descends, and every symlink it may meet obeys the same rule.
// Lexical cleaning alone would not do: "x/.." with x -> "." resolves above the root.
func checkLinkTarget(name, target string) error {
	switch {
	case target == "":
		return errors.New("symlink has an empty target")
	case len(target) > maxNameLen:
		return fmt.Errorf("symlink target longer than %d bytes", maxNameLen)
	case strings.IndexByte(target, 0) >= 0:
		return errors.New("symlink target contains a NUL byte")
	case strings.HasPrefix(target, "/"):
		return fmt.Errorf("symlink target %q is absolute", target)
	}
	up, descending := 0, false
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if descending {
				return fmt.Errorf(`symlink target %q uses ".." after a path component`, target)
			}
			up++
		default:
			descending = true
		}
	}
	depth := 0
	if dir := path.Dir(name); dir != "." {
		depth = strings.Count(dir, "/") + 1
	}
	if up > depth {
		return fmt.Errorf("symlink target %q escapes the target directory", target)
	}
	return nil
}

func unsafe(entry, why string) error {
	return fmt.Errorf("failed to extract %q: %w: %s", entry, ErrUnsafeEntry, why)
}

func limit(entry, why string) error {
	return fmt.Errorf("failed to extract %q: %w: %s", entry, ErrLimitExceeded, why)
}

// capReader fails once more than left bytes have been read through it.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.left <= 0 {
		// A stream of exactly the cap is fine: only a further byte is too many.
		var one [1]byte
		if n, err := c.r.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, fmt.Errorf("%w: decompressed archive stream too long", ErrLimitExceeded)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
