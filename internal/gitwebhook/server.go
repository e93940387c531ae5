package gitwebhook

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/budget"
	"github.com/stackwright/stackwright/internal/source/git"
)

const (
	// SecretName is the Secret, in each namespace that takes notifications, holding the
	// token its git hosts sign with (or send, for GitLab).
	SecretName = "stackwright-git-webhook"
	// SecretKey is the Secret's key holding the token.
	SecretKey = "token"

	// hookPath is followed by the namespace.
	hookPath = "/hooks/git/"
	// maxBodyBytes bounds what the webhook reads of a request it has found a proof
	// header on (it reads nothing of the others). Push payloads are a few KiB; GitHub's
	// largest carry the files of up to 2048 commits. A larger one is answered 413, and the
	// Stacks see the push at their next poll instead.
	maxBodyBytes = 1 << 20
	// maxConnections bounds the connections served at once, so that unauthenticated
	// callers can make the manager hold at most maxConnections*maxBodyBytes of bodies.
	maxConnections = 64

	shutdownTimeout = 10 * time.Second

	// Every signed-looking request costs one uncached Secret read. nsReads and nsBurst
	// bound the reads per namespace, so that a flood aimed at one namespace (or its
	// hosts' own retries) does not throttle another's pushes; secretReads and secretBurst
	// bound them across namespaces. Pushes come a few per second at most.
	nsReads     = 2
	nsBurst     = 10
	secretReads = 50
	secretBurst = 100
	// maxLimiters bounds the per-namespace limiters kept; only namespaces with Stacks
	// that follow a git repository get one.
	maxLimiters = 4096
)

// unauthorizedBody is the one answer to every failed proof, so that a caller cannot tell
// a namespace with a webhook from one without.
const unauthorizedBody = "unauthorized"

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Server serves the git push webhook, POST /hooks/git/{namespace}. It implements
// manager.Runnable, on the leader only: the git cache it pokes and the queue it adds to are
// the leader's.
type Server struct {
	// Addr is the address to listen on.
	Addr string
	// Listener, when set, is used instead of listening on Addr.
	Listener net.Listener
	// Stacks lists a namespace's Stacks (cached reads).
	Stacks client.Reader
	// Secrets gets the namespace's Secret SecretName. Uncached reads suit it: caching
	// would mean watching every Secret of the cluster for a few webhook tokens.
	Secrets client.Reader
	// Poke makes the cached ref listings of a repository stale and says how many cached
	// remotes use it: git.Cache.Poke.
	Poke func(repoURL string) int
	// Enqueue asks the Stack controller to reconcile a Stack now.
	Enqueue func(types.NamespacedName)
	// PokeSet makes the pull request listing of the StackSets of a namespace that follow
	// a repository stale (stackset.Reconciler.Poke); EnqueueSet asks the StackSet
	// controller to reconcile a set now. Nil when pull request events are not served.
	PokeSet    func(namespace, repository string)
	EnqueueSet func(types.NamespacedName)
	// MaxConnections bounds the connections served at once; 0 means 64.
	MaxConnections int
	// Memory is the manager's budget for tenant input in memory, which every body is
	// charged to while it is held; nil is no budget.
	Memory *budget.Budget
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (s *Server) NeedLeaderElection() bool { return true }

// Start serves until ctx ends, then lets the requests under way finish.
func (s *Server) Start(ctx context.Context) error {
	ln := s.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.Addr); err != nil {
			return fmt.Errorf("failed to listen on %s: %w", s.Addr, err)
		}
	}
	ln = netutil.LimitListener(ln, cmp.Or(s.MaxConnections, maxConnections))
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		// Not cancelled with ctx: the requests under way at shutdown finish their List and
		// Enqueue instead of answering 500 to a host that will not retry.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return fmt.Errorf("failed to shut down git webhook server: %w", err)
		}
		return nil
	case err := <-errc:
		return fmt.Errorf("failed to serve git webhook: %w", err)
	}
}

// Handler returns the webhook's routes. Requests to other paths, or with another method,
// get the mux's 404 or 405 and are not counted.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	reads := newLimiters()
	mux.HandleFunc("POST "+hookPath+"{namespace}", func(w http.ResponseWriter, r *http.Request) {
		requests.WithLabelValues(s.serve(w, r, reads)).Inc()
	})
	return mux
}

// serve answers one notification and returns the result to count. What costs the manager
// something comes after what proves the caller may ask for it: nothing is read of a
// request without a proof header, or for a namespace with no Stack a push could concern;
// the Secret is read within the namespace's rate; the body, bounded, only then.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, reads *limiters) string {
	ctx := r.Context()
	log := ctrl.LoggerFrom(ctx).WithName("git-webhook")
	ns := r.PathValue("namespace")
	if len(validation.IsDNS1123Label(ns)) > 0 {
		http.NotFound(w, r)
		return resultNotFound
	}
	h := hookOf(r.Header)
	if h.proof == "" {
		log.V(1).Info("Refused unsigned notification", "namespace", ns, "kind", h.kind)
		return unauthorized(w)
	}
	// The same answer as a wrong proof: a caller cannot tell which namespaces have Stacks.
	followed, err := s.listens(ctx, ns)
	if err != nil {
		log.Error(err, "Failed to list Stacks", "namespace", ns)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return resultError
	}
	if !followed {
		return unauthorized(w)
	}
	if !reads.allow(ns) {
		w.Header().Set("Connection", "close")
		http.Error(w, "too many requests", http.StatusTooManyRequests)
		return resultThrottled
	}
	charge := s.Memory.Charge()
	defer charge.Release()
	body, err := io.ReadAll(charge.Reader(http.MaxBytesReader(w, r.Body, maxBodyBytes)))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			http.Error(w, "payload too large", http.StatusRequestEntityTooLarge)
			return resultTooLarge
		}
		if errors.Is(err, budget.ErrSpent) {
			// Forges deliver again on a 5xx; the push is not lost to the manager's load.
			w.Header().Set("Retry-After", "5")
			http.Error(w, "the manager is busy; deliver again later", http.StatusServiceUnavailable)
			return resultThrottled
		}
		http.Error(w, "failed to read payload", http.StatusBadRequest)
		return resultBadRequest
	}
	token, err := s.token(ctx, ns)
	if err != nil {
		log.Error(err, "Failed to read the webhook token", "namespace", ns)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return resultError
	}
	// An empty token would let anyone compute the signature.
	if len(token) == 0 || !h.verify(h.proof, body, token) {
		log.V(1).Info("Refused notification", "namespace", ns, "kind", h.kind)
		return unauthorized(w)
	}
	if h.kind == "github" && h.event == "ping" {
		reply(w, http.StatusOK, 0)
		return resultIgnored
	}
	p, err := h.parse(h.event, r.Header.Get("Content-Type"), body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return resultBadRequest
	}
	if p == nil {
		reply(w, http.StatusAccepted, 0)
		return resultIgnored
	}
	if p.pullRequests != "" {
		n, err := s.dispatchPulls(ctx, ns, p.pullRequests)
		if err != nil {
			log.Error(err, "Failed to notify StackSets of pull requests", "namespace", ns)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return resultError
		}
		log.Info("Accepted pull request notification", "namespace", ns, "kind", h.kind, "repository", p.pullRequests, "stackSets", n)
		reply(w, http.StatusAccepted, n)
		return resultAccepted
	}
	n, remotes, err := s.dispatch(ctx, ns, p)
	if err != nil {
		log.Error(err, "Failed to notify Stacks of a push", "namespace", ns)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return resultError
	}
	log.Info("Accepted git push", "namespace", ns, "kind", h.kind, "repositories", p.repos, "ref", p.ref, "stacks", n, "cachedRemotes", remotes)
	reply(w, http.StatusAccepted, n)
	return resultAccepted
}

// listens reports whether a Stack of ns follows a git repository, or a StackSet of ns
// follows a forge's pull requests. It runs before any proof is checked, so it reads the
// cache's own objects rather than copies of a namespace's every Stack (read only).
func (s *Server) listens(ctx context.Context, ns string) (bool, error) {
	var stacks pulumiv1.StackList
	if err := s.Stacks.List(ctx, &stacks, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("failed to list Stacks in %s: %w", ns, err)
	}
	if slices.ContainsFunc(stacks.Items, func(st pulumiv1.Stack) bool { return st.Spec.ProjectRepo != "" }) {
		return true, nil
	}
	if s.PokeSet == nil {
		return false, nil
	}
	var sets v1alpha1.StackSetList
	if err := s.Stacks.List(ctx, &sets, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("failed to list StackSets in %s: %w", ns, err)
	}
	return slices.ContainsFunc(sets.Items, func(set v1alpha1.StackSet) bool { return set.Spec.Generator.PullRequests != nil }), nil
}

// dispatchPulls makes the StackSets of ns that follow repository's pull requests list them
// again now. It returns how many it enqueued.
func (s *Server) dispatchPulls(ctx context.Context, ns, repository string) (int, error) {
	if s.PokeSet == nil {
		return 0, nil
	}
	var sets v1alpha1.StackSetList
	if err := s.Stacks.List(ctx, &sets, client.InNamespace(ns)); err != nil {
		return 0, fmt.Errorf("failed to list StackSets in %s: %w", ns, err)
	}
	s.PokeSet(ns, repository)
	n := 0
	for i := range sets.Items {
		set := &sets.Items[i]
		if g := set.Spec.Generator.PullRequests; g != nil && set.DeletionTimestamp.IsZero() && strings.EqualFold(g.Repository, repository) {
			s.EnqueueSet(client.ObjectKeyFromObject(set))
			n++
		}
	}
	return n, nil
}

// limiters bound the Secret reads callers cause before they are authenticated: per
// namespace, and across namespaces.
type limiters struct {
	mu     sync.Mutex
	global *rate.Limiter
	byNS   map[string]*rate.Limiter
}

func newLimiters() *limiters {
	return &limiters{global: rate.NewLimiter(secretReads, secretBurst), byNS: map[string]*rate.Limiter{}}
}

func (l *limiters) allow(ns string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.byNS[ns]
	if !ok {
		if len(l.byNS) >= maxLimiters {
			clear(l.byNS)
		}
		lim = rate.NewLimiter(nsReads, nsBurst)
		l.byNS[ns] = lim
	}
	return lim.Allow() && l.global.Allow()
}

// token returns the namespace's webhook token, nil when it has none. Forbidden counts as
// none: a namespace-scoped install cannot read Secrets where it serves no Stacks.
func (s *Server) token(ctx context.Context, ns string) ([]byte, error) {
	var secret corev1.Secret
	err := s.Secrets.Get(ctx, types.NamespacedName{Namespace: ns, Name: SecretName}, &secret)
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get Secret %s/%s: %w", ns, SecretName, err)
	}
	return secret.Data[SecretKey], nil
}

// dispatch pokes each repository the push concerns once, before enqueueing its Stacks, so
// that their reconciles list the refs anew. It returns how many Stacks it enqueued and how
// many cached remotes it made stale (0 where no Stack has listed the repository yet).
func (s *Server) dispatch(ctx context.Context, ns string, p *push) (int, int, error) {
	var stacks pulumiv1.StackList
	if err := s.Stacks.List(ctx, &stacks, client.InNamespace(ns)); err != nil {
		return 0, 0, fmt.Errorf("failed to list Stacks in %s: %w", ns, err)
	}
	poked, remotes := map[string]bool{}, 0
	var matched []types.NamespacedName
	for i := range stacks.Items {
		st := &stacks.Items[i]
		if !p.concerns(st) {
			continue
		}
		if key := git.RepoKey(st.Spec.ProjectRepo); !poked[key] {
			poked[key] = true
			remotes += s.Poke(st.Spec.ProjectRepo)
		}
		matched = append(matched, client.ObjectKeyFromObject(st))
	}
	for _, k := range matched {
		s.Enqueue(k)
	}
	return len(matched), remotes, nil
}

// concerns reports whether the Stack tracks the pushed branch. A Stack without a branch
// follows the repository's default one, which a notification does not name: it is
// concerned by every branch, at the cost of a listing that may find nothing new.
func (p *push) concerns(st *pulumiv1.Stack) bool {
	spec := &st.Spec
	if st.DeletionTimestamp != nil || spec.ProjectRepo == "" || spec.Commit != "" {
		return false
	}
	if len(p.repos) > 0 && !slices.Contains(p.repos, git.RepoKey(spec.ProjectRepo)) {
		return false
	}
	branch := strings.TrimPrefix(spec.Branch, "refs/heads/")
	return p.branch == "" || branch == "" || branch == p.branch
}

// unauthorized answers a failed proof. The connection is closed rather than drained: the
// body of a request refused unread is not worth reading.
func unauthorized(w http.ResponseWriter) string {
	w.Header().Set("Connection", "close")
	http.Error(w, unauthorizedBody, http.StatusUnauthorized)
	return resultUnauthorized
}

// reply tells the count only: the names of a namespace's Stacks are not the host's business.
func reply(w http.ResponseWriter, status, stacks int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Stacks int `json:"stacks"`
	}{stacks})
}
