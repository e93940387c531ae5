package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/stackwright/stackwright/internal/crashpoint"
)

// lockHolder matches one lock of a self-managed backend's "currently locked" error:
// "  s3://bucket/.pulumi/locks/…/<uuid>.json: created by user@host (pid 12) at <time>".
var (
	lockHolder = regexp.MustCompile(`(?m)^\s*(\S+): created by [^@\s]*@(\S+) \(pid (\d+)\)`)
	lockCount  = regexp.MustCompile(`currently locked by (\d+) lock\(s\)`)
)

// staleLockHolders returns the holders named by a self-managed backend's lock conflict,
// and the locks' URLs, when every one of them is one the caller proved gone (gone reports
// it, from the holder's host name and pid). Anything else (a live holder, a lock it cannot
// attribute, Pulumi Cloud's lease, which the service releases by itself) yields nil:
// removing a live holder's lock lets two updates corrupt one stack.
func staleLockHolders(text string, gone func(host string, pid int) bool) (holders, locks []string) {
	m := lockCount.FindStringSubmatch(text)
	if m == nil {
		return nil, nil
	}
	n, _ := strconv.Atoi(m[1])
	found := lockHolder.FindAllStringSubmatch(text, -1)
	if n == 0 || len(found) != n {
		return nil, nil
	}
	for _, f := range found {
		pid, err := strconv.Atoi(f[3])
		if err != nil || !gone(f[2], pid) {
			return nil, nil
		}
		holders = append(holders, fmt.Sprintf("%s (pid %d)", f[2], pid))
		locks = append(locks, f[1])
	}
	return holders, locks
}

// holderGone is the request's proof of which lock holders are gone: a runner Pod whose Job
// ended (StaleLockHosts are prefixes: a runner Pod's host name is its Job's name, and a
// Pod made before that was host-named after its Pod, which starts with a short Job's name),
// or, with StaleLocalLocks, a process of this host that no
// longer exists. Nil when the request proves nothing.
func (x *run) holderGone() func(host string, pid int) bool {
	if len(x.req.StaleLockHosts) == 0 && !x.req.StaleLocalLocks {
		return nil
	}
	self, err := os.Hostname()
	if err != nil {
		self = ""
	}
	return func(host string, pid int) bool {
		if hasAnyPrefix(host, x.req.StaleLockHosts) {
			return true
		}
		return x.req.StaleLocalLocks && self != "" && host == self && !processAlive(pid)
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if p != "" && strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// healStaleLock removes the stack's locks after op failed on them, when all of them belong
// to holders the caller proved gone, and reports whether op should be tried again. It works
// the same for file://, s3://, gs:// and azblob:// backends: `pulumi cancel` on a
// self-managed backend deletes the stack's lock files. That removes every lock of the
// stack, so it runs only right after the CLI listed them all as stale; a new holder could
// appear in between only by running outside Stackwright, which never runs two updates of
// one Stack at once.
func (x *run) healStaleLock(ctx context.Context, err error) bool {
	gone := x.holderGone()
	if gone == nil || Classify(err) != ClassConflict {
		return false
	}
	hosts, locks := staleLockHolders(err.Error(), gone)
	if hosts == nil {
		return false
	}
	if _, cerr := x.cli(ctx, "remove stale locks", nil, false, "cancel", "--yes", "--stack", x.req.Stack); cerr != nil {
		// `pulumi cancel` needs the stack; a pulumi killed while creating it leaves a lock
		// without one, which only deleting the lock objects themselves can clear.
		if strings.Contains(strings.ToLower(cerr.Error()), "no stack named") {
			cerr = x.removeLocksWithoutStack(ctx, locks, gone)
		}
		if cerr != nil {
			x.log.println(fmt.Sprintf("failed to remove the stale lock(s) of %s: %v", strings.Join(hosts, ", "), cerr))
			return false
		}
	}
	x.log.println(fmt.Sprintf("removed %d stale lock(s) held by process(es) that are gone: %s", len(hosts), strings.Join(hosts, ", ")))
	x.healed = append(x.healed, hosts...)
	if x.onHeal != nil {
		x.onHeal()
	}
	crashpoint.Hit(crashpoint.LocksHealed)
	return true
}

// removeLocksWithoutStack removes the locks of a stack that does not exist, all of them held
// by holders the caller proved gone: on a file:// backend the lock files, on s3://, gs://
// and azblob:// the lock objects the conflict listed (locks are their URLs), which
// stackwright-unlock deletes with the run's environment, and so the credentials and URL
// parameters the CLI itself used.
func (x *run) removeLocksWithoutStack(ctx context.Context, locks []string, gone func(host string, pid int) bool) error {
	backend := x.env["PULUMI_BACKEND_URL"]
	u, err := url.Parse(backend)
	if err != nil {
		return fmt.Errorf("failed to parse the backend URL: %w", err)
	}
	switch u.Scheme {
	case "file":
		if !x.removeLockFiles(gone) {
			return errors.New("not every lock file belongs to a holder that is gone")
		}
		return nil
	case "s3", "gs", "azblob":
		return x.unlock(ctx, backend, locks)
	default:
		return fmt.Errorf("the stack does not exist, and the locks of a stack that does not exist are removed on file://, s3://, gs:// and azblob:// backends only, not on %s://", u.Scheme)
	}
}

// UnlockName is the program that deletes lock objects from s3://, gs:// and azblob://
// backends (cmd/stackwright-unlock), installed next to stackwright. A run looks for it next
// to the pulumi CLI, next to this process's executable (a runner Pod's bootstrap directory,
// where a workspace image's pulumi is elsewhere), then on PATH.
const UnlockName = "stackwright-unlock"

// findUnlock returns the path of stackwright-unlock for a run whose CLI is pulumi.
func findUnlock(pulumi string) (string, error) {
	dirs := []string{filepath.Dir(pulumi)}
	if self, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(self))
	}
	for _, d := range dirs {
		p := filepath.Join(d, UnlockName)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath(UnlockName)
	if err != nil {
		return "", fmt.Errorf("failed to find %s next to pulumi, next to this program or on PATH: %w", UnlockName, err)
	}
	return p, nil
}

// unlock runs stackwright-unlock on the lock objects locks names, with the run's
// environment (nothing else of this process's), and copies what it says to the run's log.
func (x *run) unlock(ctx context.Context, backend string, locks []string) error {
	if len(locks) == 0 {
		return errors.New("the conflict names no lock object")
	}
	bin, err := findUnlock(x.cmd.path)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{backend}, locks...)...)
	cmd.Dir = x.req.WorkDir
	cmd.Env = append(x.cmd.base(), x.envList()...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if text := strings.TrimSpace(out.String()); text != "" {
		x.log.println(text)
	}
	if err != nil {
		return fmt.Errorf("failed to run %s: %w", UnlockName, err)
	}
	return nil
}

// removeLockFiles removes, from a file:// backend, the lock files of this run's stack whose
// holders gone proves gone, and reports whether it removed them all: any other holder's
// lock stays, and then so does the failure. Every lock is judged before any is removed, so
// a live holder's lock keeps its stale neighbours too (the failure stands either way). The
// backend writes each blob with a ".attrs" sidecar (gocloud's fileblob), which goes with
// its lock: left alone it would be litter no listing shows.
func (x *run) removeLockFiles(gone func(host string, pid int) bool) bool {
	root, name, ok := x.fileBackendStack()
	if !ok {
		return false
	}
	dir := filepath.Join(root, ".pulumi", "locks", "organization", x.project, name)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	var locks []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), attrsSuffix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		var lock struct {
			PID      int    `json:"pid"`
			Hostname string `json:"hostname"`
		}
		if json.Unmarshal(b, &lock) != nil || !gone(lock.Hostname, lock.PID) {
			return false
		}
		locks = append(locks, path)
	}
	if len(locks) == 0 {
		return false
	}
	for _, path := range locks {
		if err := os.Remove(path); err != nil {
			return false
		}
		if err := os.Remove(path + attrsSuffix); err != nil && !os.IsNotExist(err) {
			return false
		}
	}
	return true
}

// attrsSuffix names the sidecar in which gocloud's fileblob, under every file:// backend,
// keeps a blob's attributes.
const attrsSuffix = ".attrs"
