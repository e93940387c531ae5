package job

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/artifact"
)

// maxResultBytes bounds a runner's report: a status (with its bounded log tail) and
// the stack's outputs.
const maxResultBytes = 8 << 20

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list

// server is the manager's runner API: runners fetch their artifact and hand back their
// result here. A runner proves who it is with a projected ServiceAccount token bound to
// its Pod (audience TokenAudience); the manager checks it with a TokenReview and accepts a
// request only from the Pod of the Job it created for that Update, so one runner can
// neither read another Update's artifact nor write another Update's result.
type server struct {
	client   client.Client
	reader   client.Reader // uncached: Pods are not watched
	store    *artifact.Store
	cert     tls.Certificate
	addr     string
	record   func(ctx context.Context, u *v1alpha1.Update, res *Result) error
	tokens   *tokenCache
	listener net.Listener
}

// identity is an authenticated runner: its Pod, and the Update that Pod runs.
type identity struct {
	pod    *corev1.Pod
	update *v1alpha1.Update
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+artifactPath+"{digest}", s.artifact)
	mux.HandleFunc("POST "+resultPath+"{namespace}/{name}", s.result)
	return mux
}

// Start serves until ctx ends. It implements manager.Runnable (leader only: the artifact
// store and the Updates' results belong to the leader).
func (s *server) Start(ctx context.Context) error {
	ln := s.listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.addr); err != nil {
			return fmt.Errorf("failed to listen on %s: %w", s.addr, err)
		}
	}
	srv := &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{s.cert}},
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	case err := <-errc:
		return fmt.Errorf("failed to serve runner API: %w", err)
	}
}

func (s *server) artifact(w http.ResponseWriter, r *http.Request) {
	id, status, err := s.authenticate(r)
	if err != nil {
		s.deny(w, r, status, err)
		return
	}
	digest := r.PathValue("digest")
	if digest != id.update.Spec.ArtifactDigest {
		s.deny(w, r, http.StatusForbidden, fmt.Errorf("artifact %s is not the one of Update %s", digest, id.update.Name))
		return
	}
	f, err := s.store.Open(digest)
	if err != nil {
		http.Error(w, "artifact not in the store", http.StatusNotFound)
		return
	}
	defer func() { _ = f.Close() }()
	w.Header().Set("Content-Type", "application/gzip")
	_, _ = io.Copy(w, f)
}

func (s *server) result(w http.ResponseWriter, r *http.Request) {
	id, status, err := s.authenticate(r)
	if err != nil {
		s.deny(w, r, status, err)
		return
	}
	if r.PathValue("namespace") != id.update.Namespace || r.PathValue("name") != id.update.Name {
		s.deny(w, r, http.StatusForbidden, fmt.Errorf("runner of Update %s reported for %s/%s", id.update.Name, r.PathValue("namespace"), r.PathValue("name")))
		return
	}
	res := &Result{}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxResultBytes)).Decode(res); err != nil {
		http.Error(w, "malformed result: "+err.Error(), http.StatusBadRequest)
		return
	}
	if res.UpdateUID != string(id.update.UID) {
		http.Error(w, "result is for another Update", http.StatusConflict)
		return
	}
	if !id.update.Status.Finished() {
		if err := s.record(r.Context(), id.update, res); err != nil {
			ctrl.LoggerFrom(r.Context()).Error(err, "Failed to record runner result", "update", id.update.Name)
			http.Error(w, "failed to record result", http.StatusServiceUnavailable)
			return
		}
	}
	// A repeated report (the first answer was lost) is acknowledged without effect.
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) deny(w http.ResponseWriter, r *http.Request, status int, err error) {
	ctrl.LoggerFrom(r.Context()).Info("Refused runner request", "path", r.URL.Path, "reason", err.Error())
	http.Error(w, http.StatusText(status), status)
}

// authenticate resolves the request's token to the runner Pod and its Update.
func (s *server) authenticate(r *http.Request) (*identity, int, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return nil, http.StatusUnauthorized, errors.New("no bearer token")
	}
	ctx := r.Context()
	user, err := s.tokens.review(ctx, s.client, token)
	if err != nil {
		return nil, http.StatusUnauthorized, err
	}
	ns, sa, ok := serviceAccountOf(user.Username)
	podNames := user.Extra["authentication.kubernetes.io/pod-name"]
	podUIDs := user.Extra["authentication.kubernetes.io/pod-uid"]
	if !ok || len(podNames) != 1 || len(podUIDs) != 1 {
		return nil, http.StatusUnauthorized, fmt.Errorf("token of %s is not bound to a Pod", user.Username)
	}
	pod := &corev1.Pod{}
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: podNames[0]}, pod); err != nil {
		return nil, http.StatusUnauthorized, fmt.Errorf("failed to get runner Pod %s/%s: %w", ns, podNames[0], err)
	}
	if string(pod.UID) != podUIDs[0] || pod.Spec.ServiceAccountName != sa {
		return nil, http.StatusUnauthorized, fmt.Errorf("token does not match Pod %s/%s", ns, pod.Name)
	}
	job := metav1.GetControllerOf(pod)
	if job == nil || job.Kind != "Job" {
		return nil, http.StatusForbidden, fmt.Errorf("pod %s/%s is not a runner", ns, pod.Name)
	}
	j := &batchv1.Job{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.Name}, j); err != nil {
		return nil, http.StatusForbidden, fmt.Errorf("failed to get runner Job %s/%s: %w", ns, job.Name, err)
	}
	owner := metav1.GetControllerOf(j)
	if j.UID != job.UID || j.Labels[LabelManagedBy] != ManagedBy || owner == nil || owner.Kind != "Update" {
		return nil, http.StatusForbidden, fmt.Errorf("job %s/%s is not a Stackwright runner", ns, j.Name)
	}
	u := &v1alpha1.Update{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: owner.Name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, http.StatusGone, fmt.Errorf("update %s/%s is gone", ns, owner.Name)
		}
		return nil, http.StatusServiceUnavailable, err
	}
	if u.UID != owner.UID || u.Status.Runner != runnerIdentity(u) || j.Name != jobName(u) {
		return nil, http.StatusForbidden, fmt.Errorf("job %s/%s does not run Update %s", ns, j.Name, u.Name)
	}
	return &identity{pod: pod, update: u}, 0, nil
}

func serviceAccountOf(username string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(username, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	return namespace, name, ok
}

// tokenCache keeps TokenReview answers briefly: a runner presents the same token for its
// artifact and its result, and retries.
type tokenCache struct {
	mu      sync.Mutex
	entries map[[32]byte]tokenEntry
	ttl     time.Duration
}

type tokenEntry struct {
	user    authenticationv1.UserInfo
	expires time.Time
}

func newTokenCache() *tokenCache {
	return &tokenCache{entries: map[[32]byte]tokenEntry{}, ttl: time.Minute}
}

func (c *tokenCache) review(ctx context.Context, cl client.Client, token string) (authenticationv1.UserInfo, error) {
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	c.mu.Lock()
	if e, ok := c.entries[key]; ok && now.Before(e.expires) {
		c.mu.Unlock()
		return e.user, nil
	}
	for k, e := range c.entries {
		if now.After(e.expires) {
			delete(c.entries, k)
		}
	}
	c.mu.Unlock()
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{TokenAudience}}}
	if err := cl.Create(ctx, tr); err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("failed to review token: %w", err)
	}
	if !tr.Status.Authenticated {
		return authenticationv1.UserInfo{}, fmt.Errorf("token not authenticated: %s", tr.Status.Error)
	}
	audienceOK := false
	for _, a := range tr.Status.Audiences {
		audienceOK = audienceOK || a == TokenAudience
	}
	if !audienceOK {
		return authenticationv1.UserInfo{}, errors.New("token is not meant for the runner API")
	}
	c.mu.Lock()
	c.entries[key] = tokenEntry{user: tr.Status.User, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return tr.Status.User, nil
}
