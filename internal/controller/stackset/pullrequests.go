package stackset

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/forge"
)

// defaultForgeAPI is the API base URL of a forge that has one public instance.
var defaultForgeAPI = map[string]string{string(forge.GitHub): "https://api.github.com", string(forge.GitLab): "https://gitlab.com/api/v4"}

// defaultTokenKey is the token Secret's key when the set names none.
const defaultTokenKey = "token"

// pullRequestElements lists the open pull requests of the set's repository (at most once
// per interval, unless a webhook asked for a listing) and returns the elements of those
// the generator keeps. A forge that refuses the set stalls it; one that cannot answer now
// is asked again at the interval, and nothing is removed meanwhile.
func (r *Reconciler) pullRequestElements(ctx context.Context, s *scope) ([]element, error) {
	set := s.set
	g := set.Spec.Generator.PullRequests
	c, err := r.forgeClient(ctx, set)
	if err != nil {
		// A Secret or a forge fixed outside the set is seen at the next interval.
		s.requeue.After(interval(set))
		return nil, err
	}
	s.forge = c
	prs, err := r.listings.get(ctx, set, interval(set), c)
	if err != nil {
		if forge.Retryable(err) {
			return nil, fault.Retry(v1alpha1.ReasonForgeUnavailable, "failed to list the pull requests of %s on %s: %v", g.Repository, g.Forge, err)
		}
		s.requeue.After(interval(set))
		return nil, fault.Stall(v1alpha1.ReasonForgeRefused, "failed to list the pull requests of %s on %s: %v", g.Repository, g.Forge, err)
	}
	forks, err := r.forksAllowed(ctx, set)
	if err != nil {
		return nil, err
	}
	elems, skipped, err := prElements(g, prs, forks)
	if err != nil {
		return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.generator.pullRequests: %v", err)
	}
	set.Status.SkippedForks = int32(skipped) //nolint:gosec // at most a listing's pages of pull requests
	s.prs = map[string]forge.PullRequest{}
	for _, pr := range prs {
		s.prs[fmt.Sprint(pr.Number)] = pr
	}
	return elems, nil
}

// forgeClient reads the generator's token and returns the client of its forge.
func (r *Reconciler) forgeClient(ctx context.Context, set *v1alpha1.StackSet) (forge.Client, error) {
	g := set.Spec.Generator.PullRequests
	api := cmp.Or(g.API, defaultForgeAPI[g.Forge])
	if api == "" {
		return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.generator.pullRequests.api is required for %s", g.Forge)
	}
	key := cmp.Or(g.TokenSecretRef.Key, defaultTokenKey)
	sec := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: set.Namespace, Name: g.TokenSecretRef.Name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fault.Stall(v1alpha1.ReasonForgeRefused, "the token Secret %s of spec.generator.pullRequests does not exist", g.TokenSecretRef.Name)
		}
		return nil, fmt.Errorf("failed to get Secret %s: %w", g.TokenSecretRef.Name, err)
	}
	token := strings.TrimSpace(string(sec.Data[key]))
	if token == "" {
		return nil, fault.Stall(v1alpha1.ReasonForgeRefused, "the token Secret %s of spec.generator.pullRequests has no key %s", g.TokenSecretRef.Name, key)
	}
	newForge := r.NewForge
	if newForge == nil {
		newForge = forge.New
	}
	c, err := newForge(forge.Options{Kind: forge.Kind(g.Forge), API: api, Repository: g.Repository, Token: token})
	if err != nil {
		return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.generator.pullRequests: %v", err)
	}
	return c, nil
}

// forksAllowed reports whether the set may give forks' pull requests Stacks: it asks for
// it, and the platform team allows it for its namespace.
func (r *Reconciler) forksAllowed(ctx context.Context, set *v1alpha1.StackSet) (bool, error) {
	if set.Spec.Generator.PullRequests.Forks != v1alpha1.PullRequestForksAllow {
		return false, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: set.Namespace}, ns); err != nil {
		return false, fmt.Errorf("failed to get Namespace %s: %w", set.Namespace, err)
	}
	return ns.Labels[v1alpha1.ForkPullRequestsLabel] == "allow", nil
}

// Poke makes the next reconcile of the sets of namespace whose pullRequests generator
// follows repository list it again, whatever its interval: a forge's webhook said a pull
// request changed.
func (r *Reconciler) Poke(namespace, repository string) {
	r.listings.poke(namespace, repository)
}

// listings keeps each set's last pull request listing for its interval, so that the
// reconciles its Stacks' changes bring do not each ask the forge.
type listings struct {
	mu sync.Mutex
	by map[types.NamespacedName]listing
}

type listing struct {
	at  time.Time
	prs []forge.PullRequest
	// repo is the repository and API the listing is of: a set that changes them lists
	// again at once.
	repo string
}

func (l *listings) get(ctx context.Context, set *v1alpha1.StackSet, every time.Duration, c forge.Client) ([]forge.PullRequest, error) {
	name := types.NamespacedName{Namespace: set.Namespace, Name: set.Name}
	g := set.Spec.Generator.PullRequests
	l.mu.Lock()
	prev, ok := l.by[name]
	l.mu.Unlock()
	if ok && prev.repo == g.Repository+"@"+g.API && time.Since(prev.at) < every {
		return prev.prs, nil
	}
	prs, err := c.PullRequests(ctx)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[types.NamespacedName]listing{}
	}
	l.by[name] = listing{at: time.Now(), prs: prs, repo: g.Repository + "@" + g.API}
	return prs, nil
}

func (l *listings) poke(namespace, repository string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, x := range l.by {
		if name.Namespace == namespace && strings.EqualFold(strings.SplitN(x.repo, "@", 2)[0], repository) {
			delete(l.by, name)
		}
	}
}

func (l *listings) forget(name types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.by, name)
}
