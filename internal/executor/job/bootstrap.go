package job

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/reaper"
)

// Paths of the bootstrap that lets a runner Pod run another image than the runner image
// (workspaceTemplate spec.image, PKO's workspace image): an init container from the runner
// image copies the static `stackwright` binary and stackwright-reaper into an emptyDir,
// and the image's own container runs it from there with the image's pulumi, language hosts
// and plugins.
const (
	BootstrapDir    = "/stackwright/bin"
	BootstrapBinary = BootstrapDir + "/stackwright"
)

// InstallBinary copies the running executable to dest (the bootstrap init container), and
// into the same directory, where the runner looks for them, the reaper this process uses
// (reaper.Path; `install-runner` locates the one next to it) and stackwright-unlock, when
// it is installed next to this executable.
func InstallBinary(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("failed to find the running executable: %w", err)
	}
	if err := copyExecutable(self, dest); err != nil {
		return err
	}
	if r := reaper.Path(); r != "" {
		if err := copyExecutable(r, filepath.Join(filepath.Dir(dest), reaper.Name)); err != nil {
			return err
		}
	}
	// Without it, only a file:// backend's locks are removed when the stack is missing.
	unlock := filepath.Join(filepath.Dir(self), engine.UnlockName)
	if _, err := os.Stat(unlock); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return copyExecutable(unlock, filepath.Join(filepath.Dir(dest), engine.UnlockName))
}

// copyExecutable copies src to dest, read-only and executable, replacing dest at once.
func copyExecutable(src, dest string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("failed to open %s: %w", src, err)
	}
	defer func() { _ = in.Close() }()
	tmp := dest + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o555)
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", tmp, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("failed to copy %s to %s: %w", src, tmp, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("failed to write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("failed to install %s: %w", dest, err)
	}
	return nil
}

// copyProgram copies the project directory baked into the image (read-only, and shared by
// every run of it) into the run's writable work tree: the engine writes the stack's
// settings file next to Pulumi.yaml. Symbolic links are copied as links (node_modules/.bin),
// other special files are refused.
func copyProgram(src, dst string) error {
	info, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("failed to find the program at %s in the image: %w", src, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("failed to copy the program: %s in the image is not a directory", src)
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch t := d.Type(); {
		case t.IsDir():
			return os.MkdirAll(target, 0o755)
		case t&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case t.IsRegular():
			return copyFile(path, target)
		default:
			return fmt.Errorf("failed to copy the program: %s is a %s, not a file", path, t)
		}
	})
}

func copyFile(src, dst string) error {
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, info.Mode().Perm()|0o200)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}
