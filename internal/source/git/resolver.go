package git

import (
	"context"
	"path"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/source"
)

// Resolver resolves spec.projectRepo sources: a pinned commit, or the head of a branch
// polled by ref listing, turned into an artifact holding the commit's whole tree.
type Resolver struct {
	// Client reads the credential Secrets in the Stack's namespace.
	Client client.Reader
	Store  *artifact.Store
	// Cache is shared by every Stack: listings, fetches and artifacts are per repository
	// and credentials, not per Stack.
	Cache *Cache
	// Limits bound the tree of a commit; zero fields take artifact.DefaultLimits.
	Limits artifact.Limits
	// Now is the clock that ages listings; nil means time.Now.
	Now func() time.Time
}

var _ source.Resolver = (*Resolver)(nil)

// Interval is how often stack's branch is listed: its resync period (60 s when unset,
// never less than 10 s), the period at which the Stack controller requeues it, so that a
// listing younger than a Stack's period answers it.
func Interval(stack *pulumiv1.Stack) time.Duration {
	if d := stack.Spec.ResyncPeriod(); d > 0 {
		return d
	}
	return pulumiv1.DefaultResyncPeriod
}

// Resolve implements source.Resolver. Revision is the commit SHA; Dir is repoDir.
func (r *Resolver) Resolve(ctx context.Context, stack *pulumiv1.Stack) (source.Artifact, error) {
	spec := &stack.Spec.GitSource
	if spec.ProjectRepo == "" {
		return source.Artifact{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.projectRepo is not set")
	}
	dir, err := cleanRepoDir(spec.RepoDir)
	if err != nil {
		return source.Artifact{}, err
	}
	var (
		commit plumbing.Hash
		ref    plumbing.ReferenceName
	)
	switch {
	case spec.Commit != "" && spec.Branch != "":
		return source.Artifact{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.commit and spec.branch are mutually exclusive")
	case spec.Commit != "":
		if commit, err = parseCommit(spec.Commit); err != nil {
			return source.Artifact{}, err
		}
	case spec.Branch != "":
		if ref, err = branchRef(spec.Branch); err != nil {
			return source.Artifact{}, err
		}
	default:
		return source.Artifact{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.projectRepo needs spec.commit or spec.branch")
	}

	cred, err := resolveCredentials(ctx, r.Client, stack.Namespace, spec.GitAuth, spec.GitAuthSecret)
	if err != nil {
		return source.Artifact{}, err
	}
	rm, release, err := r.Cache.remote(stack.Namespace, spec.ProjectRepo, cred)
	if err != nil {
		return source.Artifact{}, err
	}
	defer release()
	if ref != "" {
		now := r.Now
		if now == nil {
			now = time.Now
		}
		if commit, err = rm.head(ctx, stack.Namespace, ref, spec.Shallow, Interval(stack), now); err != nil {
			return source.Artifact{}, err
		}
	}
	a := source.Artifact{Revision: commit.String(), Dir: dir}
	if d, ok := rm.memoised(commit, dir, r.Store); ok {
		a.Digest = d
		return a, nil
	}
	if err := rm.ensure(ctx, stack.Namespace, commit, ref, spec.Shallow); err != nil {
		return source.Artifact{}, err
	}
	if a.Digest, err = rm.artifact(ctx, stack.Namespace, commit, dir, r.Store, r.limits()); err != nil {
		return source.Artifact{}, err
	}
	return a, nil
}

func (r *Resolver) limits() artifact.Limits {
	l := r.Limits
	if l.MaxBytes <= 0 {
		l.MaxBytes = artifact.DefaultLimits.MaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = artifact.DefaultLimits.MaxFiles
	}
	return l
}

// cleanRepoDir returns repoDir as a clean slash-separated path relative to the repository
// root ("" for the root). A leading slash is accepted and means the root, as PKO joined
// repoDir onto its checkout directory; climbing out of the repository is refused.
func cleanRepoDir(dir string) (string, error) {
	if strings.ContainsRune(dir, 0) || strings.Contains(dir, `\`) {
		return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.repoDir %q is not a valid path", dir)
	}
	if hasDotDot(dir) {
		return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.repoDir %q must stay inside the repository (no %q components)", dir, "..")
	}
	return strings.TrimPrefix(path.Clean("/"+dir), "/"), nil
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

// parseCommit accepts full 40-hex SHA-1 commit names, in either case.
func parseCommit(s string) (plumbing.Hash, error) {
	lower := strings.ToLower(s)
	isHex := lower != "" && strings.Trim(lower, "0123456789abcdef") == ""
	switch {
	case isHex && len(lower) == 40:
		return plumbing.NewHash(lower), nil
	case isHex && len(lower) < 40:
		return plumbing.ZeroHash, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.commit %q is an abbreviated SHA: give the full 40-character commit SHA (git rev-parse %s)", s, s)
	case isHex && len(lower) == 64:
		return plumbing.ZeroHash, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.commit %q is a SHA-256 commit name: SHA-256 repositories are not supported", s)
	}
	return plumbing.ZeroHash, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.commit %q is not a commit SHA (40 hexadecimal characters)", s)
}

// branchRef maps spec.branch to the ref to list: "main" and "refs/heads/main" are the same
// branch; any other full ref name ("refs/tags/v1", as the Automation API respects) is
// taken as written.
func branchRef(b string) (plumbing.ReferenceName, error) {
	ref := plumbing.ReferenceName(b)
	if !strings.HasPrefix(b, "refs/") {
		ref = plumbing.NewBranchReferenceName(b)
	}
	if err := ref.Validate(); err != nil {
		return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.branch %q is not a valid branch name", b)
	}
	return ref, nil
}
