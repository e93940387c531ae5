package job

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/budget"
	"github.com/stackwright/stackwright/internal/clip"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/plugincache"
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
	// memory is the budget runner reports are charged to (nil: none).
	memory *budget.Budget
	// detachedNamespace is where the runner Jobs of detached Updates are, and
	// detachedOfJob finds the Update such a Job runs.
	detachedNamespace string
	detachedOfJob     func(*batchv1.Job) (*v1alpha1.Update, bool)
	// plugins is the plugin cache, on installs that let runners download plugins.
	plugins *plugincache.Cache
	// maxConns bounds the connections served at once; 0 means maxRunnerConnections.
	maxConns int
}

// maxRunnerConnections bounds the runner API's connections: a runner holds one or two
// (its report, a download) and at most --max-concurrent-updates run at once; the rest
// wait for one to close rather than each taking the manager's memory and descriptors.
const maxRunnerConnections = 512

// identity is an authenticated runner: its Pod, and the Update that Pod runs.
type identity struct {
	pod    *corev1.Pod
	update *v1alpha1.Update
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+artifactPath+"{digest}", s.artifact)
	mux.HandleFunc("POST "+resultPath+"{namespace}/{name}", s.result)
	mux.HandleFunc("GET "+pluginsAPIPath+"{file}", s.plugin)
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
	// Runners are the tenants' Pods: what they hold of the manager is bounded like any
	// tenant input, in connections and in time.
	ln = netutil.LimitListener(ln, cmp.Or(s.maxConns, maxRunnerConnections))
	srv := &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// A report is at most maxResultBytes; an artifact or a plugin is written out in
		// minutes even to a slow Pod.
		ReadTimeout:    2 * time.Minute,
		WriteTimeout:   15 * time.Minute,
		IdleTimeout:    time.Minute,
		MaxHeaderBytes: 64 << 10,
		TLSConfig:      &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{s.cert}},
		BaseContext:    func(net.Listener) context.Context { return ctx },
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
	if id.update.Status.Finished() {
		// A runner whose Pod was scheduled only after its Update was failed (the pending
		// timeout) must not run the engine beside the retry.
		s.deny(w, r, http.StatusGone, fmt.Errorf("update %s is finished", id.update.Name))
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

// plugin serves a plugin tarball from the plugin cache to a runner whose Update is still
// running. What the runner names is the tenant's word: the cache validates it and fetches
// only from the platform's plugin source.
func (s *server) plugin(w http.ResponseWriter, r *http.Request) {
	id, status, err := s.authenticate(r)
	if err != nil {
		s.deny(w, r, status, err)
		return
	}
	if s.plugins == nil {
		http.Error(w, "this install does not download plugins (the manager's --plugin-download-url is not set)", http.StatusNotFound)
		return
	}
	if id.update.Status.Finished() {
		s.deny(w, r, http.StatusGone, fmt.Errorf("update %s is finished", id.update.Name))
		return
	}
	file := r.PathValue("file")
	f, err := s.plugins.Open(r.Context(), file)
	if err != nil {
		code := http.StatusBadGateway
		switch {
		case errors.Is(err, plugincache.ErrInvalid):
			code = http.StatusBadRequest
		case errors.Is(err, plugincache.ErrNotAllowed), errors.Is(err, plugincache.ErrTooLarge):
			code = http.StatusForbidden
		case errors.Is(err, plugincache.ErrNotFound):
			code = http.StatusNotFound
		case errors.Is(err, artifact.ErrNoSpace):
			code = http.StatusInsufficientStorage
		}
		ctrl.LoggerFrom(r.Context()).Info("Plugin not served", "update", id.update.Namespace+"/"+id.update.Name, "reason", err.Error())
		http.Error(w, err.Error(), code)
		return
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		http.Error(w, "failed to read cached plugin", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	http.ServeContent(w, r, file, info.ModTime(), f)
}

// decodeResult reads a runner's report, charging it to the manager's memory budget (the
// caller releases charge once the report is handled). tooLarge is a report past
// maxResultBytes; an error comes with the status to answer: 503 when the budget is spent
// (the runner tries again on a 5xx: this is the manager's load, not its report), 400 when
// the report is not JSON.
func decodeResult(w http.ResponseWriter, r *http.Request, charge *budget.Charge) (res *Result, tooLarge bool, status int, err error) {
	res = &Result{}
	err = json.NewDecoder(charge.Reader(http.MaxBytesReader(w, r.Body, maxResultBytes))).Decode(res)
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return res, false, 0, nil
	case errors.Is(err, budget.ErrSpent):
		return nil, false, http.StatusServiceUnavailable, err
	case errors.As(err, &mbe):
		return nil, true, 0, nil
	}
	return nil, false, http.StatusBadRequest, fmt.Errorf("malformed result: %w", err)
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
	charge := s.memory.Charge()
	defer charge.Release()
	res, tooLarge, status, err := decodeResult(w, r, charge)
	if err != nil {
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "5")
		}
		http.Error(w, err.Error(), status)
		return
	}
	if tooLarge {
		// The authenticated runner of this Update made a report the manager will not
		// read: the Update fails saying so, rather than waiting to be declared lost.
		res = refusedResult(string(id.update.UID), "", fmt.Errorf("the runner's report was too large to record: it has more than %d bytes", maxResultBytes))
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
	if tooLarge {
		http.Error(w, fmt.Sprintf("result larger than %d bytes: the Update failed", maxResultBytes), http.StatusRequestEntityTooLarge)
		return
	}
	// A repeated report (the first answer was lost) is acknowledged without effect.
	w.WriteHeader(http.StatusNoContent)
}

// Bounds on what a runner reports. A runner Pod runs the Stack's image with the Stack's
// settings, so its report is the word of the Stack's author: each field is held to what
// the manager's own runs produce and what the API server accepts, so that no report can
// bloat the Update (which every manager caches), make its status patch fail (the Update
// would then wait to be declared lost), or hand an absurd value to what reads it.
const (
	// maxMessageBytes bounds status.message and the Complete condition's message. The
	// engine's messages are at most 1 KiB, plus the runner's warnings; the Stack's
	// conditions, which repeat them, keep 4 KiB too.
	maxMessageBytes = 4 << 10
	// maxPermalinkBytes bounds status.permalink, a link to the backend's console; a longer
	// one is dropped, since a cut URL leads nowhere.
	maxPermalinkBytes = 2 << 10
	// maxChangeKinds bounds status.changes: the engine counts some fifteen kinds of
	// operation (create, same, replace, ...), each named in at most maxChangeKindBytes.
	maxChangeKinds     = 32
	maxChangeKindBytes = 64
	// maxStepTextBytes bounds each string of a listed step (its op, URN, type, and each
	// property path), and maxStepProperties its changed and replacing lists.
	maxStepTextBytes  = 1 << 10
	maxStepProperties = 64
	// maxStepsBytes bounds status.steps as JSON: the steps beyond it are counted in
	// status.stepsOmitted, like those beyond v1alpha1.MaxSteps.
	maxStepsBytes = 256 << 10
	// maxOutputs and maxOutputsBytes (names and JSON values together) bound the outputs,
	// which go into one Secret of at most 1 MiB. Outputs are not cut: a report with more
	// fails its Update, since a Stack missing some of its outputs would mislead whatever
	// reads them.
	maxOutputs      = 1000
	maxOutputsBytes = 1<<20 - 16<<10
)

// runnerFailureReasons are what a failed run's report may give (v1alpha1.RunnerFailureReasons).
// A runner's claim of OOMKilled cannot be checked, and need not be: like PermanentFailure,
// which any runner may report, it counts toward its own Stack's stall, and like a lost run
// the next up looks for the run in the backend's history, which that Stack's own runner
// reads; the reason is a constant, so metrics labelled with it stay bounded.
var runnerFailureReasons = v1alpha1.RunnerFailureReasons()

// sanitizeResult holds a runner's report to the bounds above, in place: it cuts the
// fields that are only informative, keeps only the Complete condition, takes the end time
// only between start and now, and drops what a failed run has no use for. It returns an
// error, fit for the Update's message, when the report cannot be recorded as it stands:
// an outcome runner.Finish never produces, or outputs beyond their bounds. Its
// informative fields are cut even then, for the caller to keep.
func sanitizeResult(res *Result, start *metav1.Time, now time.Time) error {
	st := &res.Status
	st.Message = clip.Text(st.Message, maxMessageBytes)
	if len(st.LogTail) > v1alpha1.MaxLogTailLength {
		tail := engine.NewTail(v1alpha1.MaxLogTailLength)
		_, _ = tail.Write([]byte(st.LogTail))
		st.LogTail = tail.String()
	}
	st.Permalink = permalink(st.Permalink)
	st.Changes = changes(st.Changes)
	st.Steps, st.StepsOmitted = steps(st.Steps, st.StepsOmitted)
	if st.EndTime == nil || st.EndTime.After(now) || (start != nil && st.EndTime.Before(start)) {
		st.EndTime = &metav1.Time{Time: now}
	}
	var complete *metav1.Condition
	if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionComplete); c != nil {
		complete = &metav1.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: clip.Text(c.Message, maxMessageBytes)}
	}
	st.Conditions = nil
	if complete != nil {
		st.Conditions = []metav1.Condition{*complete}
	}
	if st.Phase != v1alpha1.UpdatePhaseSucceeded {
		res.Outputs, res.Plan, res.Steps = nil, nil, nil
	}
	if err := checkOutcome(st, complete); err != nil {
		return fmt.Errorf("the runner's report is invalid: %w", err)
	}
	if n := len(res.Outputs); n > maxOutputs {
		return fmt.Errorf("the runner's report was too large to record: it has %d outputs, more than the %d an Update may have", n, maxOutputs)
	}
	size := 0
	for k, o := range res.Outputs {
		b, err := json.Marshal(o.Value)
		if err != nil {
			return fmt.Errorf("failed to encode output %q: %w", clip.Text(k, 64), err)
		}
		size += len(k) + len(b)
	}
	if size > maxOutputsBytes {
		return fmt.Errorf("the runner's report was too large to record: its outputs take %d bytes, more than the %d an outputs Secret holds", size, maxOutputsBytes)
	}
	return nil
}

// checkOutcome accepts the outcomes runner.Finish reports: succeeded, or failed (or
// cancelled) with a reason the Stack controller knows how to retry.
func checkOutcome(st *v1alpha1.UpdateStatus, complete *metav1.Condition) error {
	if complete == nil {
		return errors.New("it has no Complete condition")
	}
	ok := false
	switch st.Phase {
	case v1alpha1.UpdatePhaseSucceeded:
		ok = st.Result == v1alpha1.UpdateResultSucceeded && complete.Status == metav1.ConditionTrue && complete.Reason == v1alpha1.ReasonSucceeded
	case v1alpha1.UpdatePhaseFailed:
		ok = (st.Result == v1alpha1.UpdateResultFailed || st.Result == v1alpha1.UpdateResultCancelled) &&
			complete.Status == metav1.ConditionFalse && slices.Contains(runnerFailureReasons, complete.Reason)
	}
	if !ok {
		// Quoted and cut: the values are the runner's.
		return fmt.Errorf("phase %q, result %q, Complete condition %q with reason %q",
			clip.Text(string(st.Phase), 64), clip.Text(string(st.Result), 64), clip.Text(string(complete.Status), 64), clip.Text(complete.Reason, 64))
	}
	return nil
}

// permalink keeps a link to the backend's console that a browser may follow: an http or
// https URL, without credentials, that fits its bound.
func permalink(s string) string {
	if len(s) > maxPermalinkBytes {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return ""
	}
	return s
}

// changes keeps the counts of at most maxChangeKinds kinds, in name order, dropping
// nameless, long-named and negative ones.
func changes(in map[string]int64) map[string]int64 {
	if len(in) == 0 {
		return nil
	}
	out := map[string]int64{}
	for _, k := range slices.Sorted(maps.Keys(in)) {
		if len(out) == maxChangeKinds {
			break
		}
		if k != "" && len(k) <= maxChangeKindBytes && in[k] >= 0 {
			out[k] = in[k]
		}
	}
	return out
}

// steps cuts each listed step's strings and lists, and keeps the first steps that fit
// v1alpha1.MaxSteps and maxStepsBytes; omitted counts those left out.
func steps(in []v1alpha1.UpdateStep, omitted int32) ([]v1alpha1.UpdateStep, int32) {
	omitted = max(omitted, 0)
	var out []v1alpha1.UpdateStep
	size := 0
	for i, st := range in {
		st = v1alpha1.UpdateStep{
			Op: clip.Text(st.Op, maxStepTextBytes), URN: clip.Text(st.URN, maxStepTextBytes), Type: clip.Text(st.Type, maxStepTextBytes),
			Changed: stepProperties(st.Changed), Replacing: stepProperties(st.Replacing),
		}
		b, _ := json.Marshal(st)
		if i == v1alpha1.MaxSteps || size+len(b) > maxStepsBytes {
			left := int64(omitted) + int64(len(in)-i)
			return out, int32(min(left, math.MaxInt32))
		}
		size += len(b)
		out = append(out, st)
	}
	return out, omitted
}

func stepProperties(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(in), maxStepProperties))
	for _, p := range in[:min(len(in), maxStepProperties)] {
		out = append(out, clip.Text(p, maxStepTextBytes))
	}
	return out
}

// refusedResult is the report recorded instead of a runner's that cannot be: a permanent
// failure saying why, with the runner's log tail for diagnosis.
func refusedResult(updateUID, logTail string, cause error) *Result {
	msg := clip.Text(cause.Error(), maxMessageBytes)
	return &Result{UpdateUID: updateUID, Status: v1alpha1.UpdateStatus{
		Phase: v1alpha1.UpdatePhaseFailed, Result: v1alpha1.UpdateResultFailed, Message: msg, LogTail: logTail,
		Conditions: []metav1.Condition{{
			Type: v1alpha1.ConditionComplete, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonPermanentFailure, Message: msg,
		}},
	}}
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
	jobs := client.Reader(s.client)
	if ns == s.detachedNamespace {
		// The manager's namespace may be outside the cache (--watch-namespaces).
		jobs = s.reader
	}
	if err := jobs.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.Name}, j); err != nil {
		return nil, http.StatusForbidden, fmt.Errorf("failed to get runner Job %s/%s: %w", ns, job.Name, err)
	}
	if j.UID != job.UID || j.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedBy {
		return nil, http.StatusForbidden, fmt.Errorf("job %s/%s is not a Stackwright runner", ns, j.Name)
	}
	if ns == s.detachedNamespace && j.Labels[LabelDetached] == "true" {
		// Only the manager creates Jobs in its own namespace.
		u, ok := s.detachedOfJob(j)
		if !ok {
			return nil, http.StatusGone, fmt.Errorf("job %s/%s runs no detached Update of this manager", ns, j.Name)
		}
		return &identity{pod: pod, update: u}, 0, nil
	}
	owner := metav1.GetControllerOf(j)
	if owner == nil || owner.Kind != "Update" {
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
