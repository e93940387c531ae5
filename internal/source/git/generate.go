package git

import (
	"context"
	"errors"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
)

// Repository names a repository as a generator reads it: its URL and credentials (as a
// Stack's gitAuth), in namespace Namespace.
type Repository struct {
	Namespace string
	URL       string
	GitAuth   *pulumiv1.GitAuthConfig
	// Interval is how old a ref listing may be.
	Interval time.Duration
}

// Branches returns the repository's branches and the commit each points at, from a listing
// no older than the repository's interval (shared with the Stacks that follow it).
func (r *Resolver) Branches(ctx context.Context, repo Repository) (map[string]string, error) {
	rm, release, err := r.remoteOf(ctx, repo)
	if err != nil {
		return nil, err
	}
	defer release()
	l, err := rm.listed(ctx, repo.Namespace, repo.Interval, r.now, "", false)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for name, h := range l.refs {
		if name.IsBranch() {
			out[name.Short()] = h.String()
		}
	}
	return out, nil
}

// Directories returns the commit branch points at and the directories that hold a Pulumi
// project (a Pulumi.yaml or Pulumi.yml) at that commit, sorted; "" is the root.
func (r *Resolver) Directories(ctx context.Context, repo Repository, branch string) (string, []string, error) {
	ref, err := branchRef(branch)
	if err != nil {
		return "", nil, err
	}
	rm, release, err := r.remoteOf(ctx, repo)
	if err != nil {
		return "", nil, err
	}
	defer release()
	h, err := rm.head(ctx, repo.Namespace, ref, false, repo.Interval, r.now)
	if err != nil {
		return "", nil, err
	}
	dirs, err := rm.projectDirs(ctx, repo.Namespace, h, ref)
	return h.String(), dirs, err
}

// projectDirs returns the project directories of commit h, fetching it if needed; they are
// remembered, since a commit never changes and a set asks at each of its reconciles.
func (rm *remote) projectDirs(ctx context.Context, ns string, h plumbing.Hash, ref plumbing.ReferenceName) ([]string, error) {
	rm.mu.Lock()
	dirs, ok := rm.projects[h]
	rm.mu.Unlock()
	if ok {
		return dirs, nil
	}
	if err := rm.ensure(ctx, ns, h, ref, false); err != nil {
		return nil, err
	}
	rp := rm.holder(h)
	if rp == nil {
		return nil, fault.Retry(pulumiv1.ReasonSourceUnavailable, "commit %s of %s is not in the cache", h, rm.url)
	}
	dirs, err := rp.projectDirs(h)
	if err != nil {
		return nil, err
	}
	rm.mu.Lock()
	if len(rm.projects) >= maxMemo {
		clear(rm.projects)
	}
	rm.projects[h] = dirs
	rm.mu.Unlock()
	return dirs, nil
}

func (r *Resolver) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Resolver) remoteOf(ctx context.Context, repo Repository) (*remote, func(), error) {
	if repo.URL == "" {
		return nil, nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "the repository URL is not set")
	}
	cred, err := resolveCredentials(ctx, r.Client, repo.Namespace, repo.GitAuth, "")
	if err != nil {
		return nil, nil, err
	}
	return r.Cache.remote(repo.Namespace, repo.URL, cred)
}

// maxProjectDirs bounds what a directory generator reads from one commit.
const maxProjectDirs = 1000

// projectDirs lists the directories of commit h that hold a Pulumi project file.
func (rp *repo) projectDirs(h plumbing.Hash) ([]string, error) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	st, err := rp.open(false)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	tree, err := commitTree(st, h)
	if err != nil {
		return nil, err
	}
	var dirs []string
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	for {
		name, e, err := walker.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if !isFile(e.Mode) || !slices.Contains(projectFiles, path.Base(name)) {
			continue
		}
		dir := strings.TrimSuffix(path.Dir(name), ".")
		if !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
		if len(dirs) > maxProjectDirs {
			return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "commit %s holds more than %d Pulumi projects", h, maxProjectDirs)
		}
	}
	slices.Sort(dirs)
	return dirs, nil
}
