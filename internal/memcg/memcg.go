package memcg

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Where the kernel says what it says, unless a Reader is told otherwise.
const (
	// DefaultRoot is where the cgroup file systems are mounted.
	DefaultRoot = "/sys/fs/cgroup"
	// DefaultMembership lists the cgroups of the calling process.
	DefaultMembership = "/proc/self/cgroup"
)

// unlimitedV1 is where cgroup v1's "no limit" starts: the kernel reports it as the largest
// page-aligned 64-bit count (9223372036854771712), and no machine has 4 EiB of memory.
const unlimitedV1 = 1 << 62

// ErrNoMemoryCgroup says the process is in no memory cgroup that can be read: no memory
// controller is mounted, or the files are not where the membership says.
var ErrNoMemoryCgroup = errors.New("no memory cgroup found")

// ErrNotCounted says the kernel does not count OOM kills per cgroup (v1 before Linux 4.13).
var ErrNotCounted = errors.New("the kernel does not count OOM kills per cgroup")

// Memory is what a memory cgroup says.
type Memory struct {
	// Version is the cgroup version, 1 or 2.
	Version int
	// Dir is the cgroup's directory.
	Dir string
	// Limit is the memory limit that applies to the cgroup's processes, in bytes: the
	// lowest of its own and its ancestors' that can be seen; 0 when there is none.
	Limit int64
	// OOMKills counts the processes of the cgroup (and its descendants) that the OOM
	// killer killed.
	OOMKills uint64
}

// KillsSince is how many processes the OOM killer killed between before and m, two reads
// of the same cgroup; 0 when they are not of the same cgroup.
func (m Memory) KillsSince(before Memory) uint64 {
	if m.Version != before.Version || m.Dir != before.Dir || m.OOMKills < before.OOMKills {
		return 0
	}
	return m.OOMKills - before.OOMKills
}

// Reader reads the memory cgroup of the calling process. The zero value reads the real
// one; tests point it at fixture files.
type Reader struct {
	// Root is where the cgroup file systems are mounted; "" means DefaultRoot.
	Root string
	// Membership is the file listing the process's cgroups; "" means DefaultMembership.
	Membership string
}

// Read reads the memory cgroup the process is in.
func (r Reader) Read() (Memory, error) {
	membership := r.Membership
	if membership == "" {
		membership = DefaultMembership
	}
	b, err := os.ReadFile(membership)
	if err != nil {
		return Memory{}, fmt.Errorf("failed to read cgroup membership: %w", err)
	}
	root := r.Root
	if root == "" {
		root = DefaultRoot
	}
	return read(root, b)
}

// Watch notes the OOM kills of the process's memory cgroup now, for Kills to compare with
// later. A cgroup that cannot be read is not an error until Kills is asked.
func (r Reader) Watch() *Watch {
	m, err := r.Read()
	return &Watch{r: r, before: m, err: err}
}

// Watch counts the OOM kills of a memory cgroup from when it started.
type Watch struct {
	r      Reader
	before Memory
	err    error
}

// Kills reads the cgroup again: how many of its processes the OOM killer killed since
// the Watch started, and what the cgroup says now.
func (w *Watch) Kills() (uint64, Memory, error) {
	if w.err != nil {
		return 0, Memory{}, w.err
	}
	m, err := w.r.Read()
	if err != nil {
		return 0, Memory{}, err
	}
	return m.KillsSince(w.before), m, nil
}

// read reads the memory cgroup that membership (the content of a /proc/<pid>/cgroup)
// names, with the cgroup file systems mounted under root. The v1 memory controller wins
// over the unified hierarchy: on a hybrid host, v2 has no memory controller.
func read(root string, membership []byte) (Memory, error) {
	v1, v2, err := parseMembership(membership)
	if err != nil {
		return Memory{}, err
	}
	if v1 != "" {
		if dir := locate(filepath.Join(root, "memory"), v1, "memory.oom_control"); dir != "" {
			return readV1(dir)
		}
	}
	if v2 != "" {
		if dir := locate(root, v2, "memory.events"); dir != "" {
			return readV2(root, dir)
		}
	}
	return Memory{}, ErrNoMemoryCgroup
}

// parseMembership finds the path of the process's v1 memory cgroup (a line
// "N:...memory...:/path") and of its v2 cgroup (the line "0::/path").
func parseMembership(b []byte) (v1, v2 string, err error) {
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		id, rest, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		controllers, path, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(path, "/") {
			continue
		}
		switch {
		case id == "0" && controllers == "":
			v2 = path
		case hasController(controllers, "memory"):
			v1 = path
		}
	}
	if err := s.Err(); err != nil {
		return "", "", fmt.Errorf("failed to parse cgroup membership: %w", err)
	}
	return v1, v2, nil
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// locate is the directory of the cgroup at path in the hierarchy mounted at mount, where
// file is: mount/path on a host; mount itself inside a container, which sees its own
// cgroup mounted there while its membership still names the host's path (v1 without a
// cgroup namespace). "" when neither holds file.
func locate(mount, path, file string) string {
	for _, dir := range []string{filepath.Join(mount, filepath.Clean("/"+path)), mount} {
		if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
			return dir
		}
	}
	return ""
}

// readV1 reads a v1 memory cgroup: memory.oom_control's oom_kill (Linux 4.13 or later),
// and the limit memory.stat's hierarchical_memory_limit gives (the lowest of the cgroup's
// and its ancestors', which a container cannot read itself: its Pod's, say), else
// memory.limit_in_bytes.
func readV1(dir string) (Memory, error) {
	m := Memory{Version: 1, Dir: dir}
	kills, ok, err := field(filepath.Join(dir, "memory.oom_control"), "oom_kill")
	switch {
	case err != nil:
		return Memory{}, err
	case !ok:
		return Memory{}, fmt.Errorf("failed to count OOM kills in %s: %w", dir, ErrNotCounted)
	}
	m.OOMKills = kills
	limit, ok, err := field(filepath.Join(dir, "memory.stat"), "hierarchical_memory_limit")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Memory{}, err
	}
	if !ok {
		if limit, err = number(filepath.Join(dir, "memory.limit_in_bytes")); err != nil {
			return Memory{}, err
		}
	}
	if limit < unlimitedV1 {
		m.Limit = int64(limit)
	}
	return m, nil
}

// readV2 reads a v2 cgroup: memory.events' oom_kill, and the lowest memory.max of the
// cgroup and its ancestors below root (a container sees none above its own).
func readV2(root, dir string) (Memory, error) {
	m := Memory{Version: 2, Dir: dir}
	kills, ok, err := field(filepath.Join(dir, "memory.events"), "oom_kill")
	switch {
	case err != nil:
		return Memory{}, err
	case !ok:
		return Memory{}, fmt.Errorf("failed to count OOM kills in %s: %w", dir, ErrNotCounted)
	}
	m.OOMKills = kills
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "memory.max"))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// The root cgroup has no limit of its own.
		case err != nil:
			return Memory{}, fmt.Errorf("failed to read memory limit: %w", err)
		default:
			if v := strings.TrimSpace(string(b)); v != "max" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return Memory{}, fmt.Errorf("failed to parse %s: %w", filepath.Join(d, "memory.max"), err)
				}
				if m.Limit == 0 || n < m.Limit {
					m.Limit = n
				}
			}
		}
		if !below(root, d) {
			break
		}
	}
	return m, nil
}

// below reports whether d is a directory below root (not root itself): one whose parent
// is still in the hierarchy mounted at root.
func below(root, d string) bool {
	rel, err := filepath.Rel(root, d)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..")
}

// field reads the value of the line "name N" of a flat keyed file (memory.oom_control,
// memory.events, memory.stat); ok is false when there is no such line.
func field(path, name string) (n uint64, ok bool, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false, fmt.Errorf("failed to read %s: %w", path, err)
	}
	for line := range strings.Lines(string(b)) {
		k, v, found := strings.Cut(strings.TrimSpace(line), " ")
		if !found || k != name {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("failed to parse %s of %s: %w", name, path, err)
		}
		return n, true, nil
	}
	return 0, false, nil
}

// number reads a file holding one number.
func number(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("failed to read %s: %w", path, err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("failed to parse %s: %w", path, err)
	}
	return n, nil
}
