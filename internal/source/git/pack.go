package git

import (
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/fault"
)

// projectFiles are the names the pulumi CLI accepts for a project file.
var projectFiles = []string{"Pulumi.yaml", "Pulumi.yml"}

// checkProject reports, as a stalled SpecInvalid fault, a repoDir that does not hold a
// Pulumi project at commit h: every update of that commit would fail the same way.
func (rp *repo) checkProject(h plumbing.Hash, dir string) error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	st, err := rp.open(false)
	if err != nil {
		return fmt.Errorf("failed to read commit %s: %w", h, err)
	}
	defer st.Close()
	tree, err := commitTree(st, h)
	if err != nil {
		return err
	}
	where := "the repository root"
	if dir != "" {
		where = fmt.Sprintf("spec.repoDir %q", dir)
		e, err := tree.FindEntry(dir)
		if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
			return fault.Stall(pulumiv1.ReasonSpecInvalid, "%s does not exist at commit %s", where, h)
		}
		if err != nil {
			return fmt.Errorf("failed to read %s at commit %s: %w", dir, h, err)
		}
		if e.Mode != filemode.Dir {
			return fault.Stall(pulumiv1.ReasonSpecInvalid, "%s is not a directory at commit %s", where, h)
		}
		if tree, err = tree.Tree(dir); err != nil {
			return fmt.Errorf("failed to read %s at commit %s: %w", dir, h, err)
		}
	}
	for _, name := range projectFiles {
		e, err := tree.FindEntry(name)
		if err != nil {
			continue
		}
		if isFile(e.Mode) {
			return nil
		}
		return fault.Stall(pulumiv1.ReasonSpecInvalid, "%s in %s at commit %s is not a regular file (symlinks and submodules are not carried into artifacts)", name, where, h)
	}
	return fault.Stall(pulumiv1.ReasonSpecInvalid, "%s has no Pulumi.yaml at commit %s", where, h)
}

// files returns the whole tree of commit h (so that a project can use sibling
// directories) as artifact.Pack input, refusing trees beyond lim before reading them
// whole. Symlinks and submodules are skipped: artifact.Pack writes regular files only, and
// a submodule's content is not in this repository. The count of skipped entries is
// returned for the log.
func (rp *repo) files(h plumbing.Hash, lim artifact.Limits) (map[string][]byte, int, error) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	st, err := rp.open(false)
	if err != nil {
		return nil, 0, fmt.Errorf("failed to read commit %s: %w", h, err)
	}
	defer st.Close()
	tree, err := commitTree(st, h)
	if err != nil {
		return nil, 0, err
	}
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	files := map[string][]byte{}
	dirs := map[string]bool{}
	var size int64
	skipped := 0
	for {
		name, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("failed to walk commit %s: %w", h, err)
		}
		if e.Mode == filemode.Dir {
			// Git has no empty directories: the ones that matter are implied by files.
			continue
		}
		if !isFile(e.Mode) {
			skipped++
			continue
		}
		blob, err := object.GetBlob(st, e.Hash)
		if err != nil {
			return nil, 0, fmt.Errorf("failed to read %s at commit %s: %w", name, h, err)
		}
		size += blob.Size
		if size > lim.MaxBytes {
			return nil, 0, fault.Stall(pulumiv1.ReasonSpecInvalid, "the tree of commit %s holds more than %d bytes, the most an artifact may unpack to", h, lim.MaxBytes)
		}
		// Extraction counts the directories it creates too.
		for d := path.Dir(name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
		if len(files)+1+len(dirs) > lim.MaxFiles {
			return nil, 0, fault.Stall(pulumiv1.ReasonSpecInvalid, "the tree of commit %s holds more than %d files and directories, the most an artifact may unpack to", h, lim.MaxFiles)
		}
		content, err := readBlob(blob)
		if err != nil {
			return nil, 0, fmt.Errorf("failed to read %s at commit %s: %w", name, h, err)
		}
		files[name] = content
	}
	return files, skipped, nil
}

// isFile reports whether m is a file artifact.Pack can carry.
func isFile(m filemode.FileMode) bool {
	return m == filemode.Regular || m == filemode.Deprecated || m == filemode.Executable
}

func readBlob(b *object.Blob) ([]byte, error) {
	r, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, b.Size))
}

// commitTree returns the root tree of commit h.
func commitTree(st storer.EncodedObjectStorer, h plumbing.Hash) (*object.Tree, error) {
	c, err := object.GetCommit(st, h)
	if err != nil {
		return nil, fmt.Errorf("failed to read commit %s: %w", h, err)
	}
	t, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("failed to read the tree of commit %s: %w", h, err)
	}
	return t, nil
}
