package flux

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/source"
)

// DefaultMaxBytes is the size cap when Resolver.MaxBytes is not set: the manager's
// --max-artifact-bytes default.
const DefaultMaxBytes = 100 << 20

// downloadTimeout bounds one download. Reconciles carry no deadline of their own, and a
// source-controller that accepts the connection and then stalls would otherwise hold a
// reconcile worker (and every Stack waiting on the same artifact) forever.
const downloadTimeout = 5 * time.Minute

// Resolver resolves spec.fluxSource: the artifact source-controller published for the
// referenced object, downloaded once per digest and stored only if it matches that digest.
type Resolver struct {
	// Client reads source.toolkit.fluxcd.io objects as unstructured. A client that does not
	// cache unstructured objects (the manager's default) sees a CRD installed after start.
	Client client.Reader
	Store  *artifact.Store
	// HTTP downloads artifacts; nil means http.DefaultClient.
	HTTP *http.Client
	// MaxBytes caps an artifact's size; 0 means DefaultMaxBytes.
	MaxBytes int64

	mu sync.Mutex
	// stored remembers, per source object, the last declared digest and the digest of the
	// tarball stored for it (the same unless source-controller uses sha384 or sha512), so
	// that a fleet of Stacks on one source costs one stat per reconcile, not a download.
	// Deleted sources leave one small entry each until the manager restarts.
	stored map[types.UID]storedArtifact
	// inflight coalesces concurrent downloads of one artifact: Stacks on one source are
	// reconciled in parallel when the source changes, and all wait for the first download.
	inflight map[fetchKey]*fetch
}

type storedArtifact struct {
	declared, digest string
}

type fetchKey struct {
	uid      types.UID
	declared string
}

type fetch struct {
	done   chan struct{}
	digest string
	err    error
	// joined counts the Resolves waiting on this download besides the one making it
	// (under Resolver.mu), for the log line that ends it.
	joined int
}

var _ source.Resolver = (*Resolver)(nil)

// Resolve implements source.Resolver. The source object is read from the Stack's own
// namespace: sourceRef has no namespace field, so a cross-namespace reference cannot be
// written.
func (r *Resolver) Resolve(ctx context.Context, stack *pulumiv1.Stack) (source.Artifact, error) {
	fs := stack.Spec.FluxSource
	if fs == nil {
		return source.Artifact{}, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.fluxSource is not set")
	}
	gvk, err := sourceGVK(fs.SourceRef)
	if err != nil {
		return source.Artifact{}, err
	}
	dir, err := cleanDir(fs.Dir)
	if err != nil {
		return source.Artifact{}, err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: fs.SourceRef.Name}, obj); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return source.Artifact{}, fault.Retry(pulumiv1.ReasonSourceUnavailable, "%s %q not found in namespace %q", gvk.Kind, fs.SourceRef.Name, stack.Namespace)
		case meta.IsNoMatchError(err):
			// Flux may be installed later, or upgraded to serve this version; retrying
			// notices either.
			return source.Artifact{}, fault.Retry(pulumiv1.ReasonSourceUnavailable, "%s %s is not served by this cluster; is Flux's source-controller installed?", gvk.GroupVersion(), gvk.Kind)
		}
		return source.Artifact{}, fmt.Errorf("failed to get %s %s: %w", gvk.Kind, fs.SourceRef.Name, err)
	}
	pub, err := readArtifact(obj)
	if err != nil {
		return source.Artifact{}, err
	}
	if pub.size > r.maxBytes() {
		// Checked before downloading: source-controller declares the size, and fetching
		// 2 GiB only to throw it away on every retry helps nobody.
		return source.Artifact{}, r.tooLarge(obj, pub, fmt.Sprintf("is %d bytes", pub.size))
	}
	digest, err := r.obtain(ctx, obj, pub)
	if err != nil {
		return source.Artifact{}, err
	}
	rev := pub.revision
	if rev == "" {
		rev = pub.digest
	}
	return source.Artifact{Revision: rev, Digest: digest, Dir: dir}, nil
}

func (r *Resolver) maxBytes() int64 {
	if r.MaxBytes > 0 {
		return r.MaxBytes
	}
	return DefaultMaxBytes
}

// tooLarge stalls: the artifact stays too large until someone changes the source or the
// manager's limit, and a new artifact wakes the Stack through its watch.
func (r *Resolver) tooLarge(obj *unstructured.Unstructured, pub published, detail string) error {
	return fault.Stall(pulumiv1.ReasonSourceUnavailable,
		"the artifact of %s %q at revision %s %s, more than the %d bytes this manager accepts (--max-artifact-bytes)",
		obj.GetKind(), obj.GetName(), pub.revision, detail, r.maxBytes())
}

// obtain returns the store digest of pub's tarball, downloading it unless it is already
// stored or being downloaded for another Stack.
func (r *Resolver) obtain(ctx context.Context, obj *unstructured.Unstructured, pub published) (string, error) {
	key := fetchKey{uid: obj.GetUID(), declared: pub.digest}
	r.mu.Lock()
	// Checked under the lock, with the stat inside: a download that finishes between a
	// check and the lookup of inflight would otherwise start a second one.
	if s, ok := r.stored[key.uid]; ok && s.declared == key.declared && r.Store.Has(s.digest) {
		r.mu.Unlock()
		return s.digest, nil
	}
	// A sha256 digest is the store's own address: after a restart, or when another source
	// published the same tarball, there is nothing to fetch.
	if strings.HasPrefix(pub.digest, "sha256:") && r.Store.Has(pub.digest) {
		r.rememberLocked(key, pub.digest)
		r.mu.Unlock()
		return pub.digest, nil
	}
	if f, ok := r.inflight[key]; ok {
		f.joined++
		r.mu.Unlock()
		select {
		case <-f.done:
			return f.digest, f.err
		case <-ctx.Done():
			return "", fmt.Errorf("failed to wait for the artifact of %s %s: %w", obj.GetKind(), obj.GetName(), ctx.Err())
		}
	}
	if err := r.Store.Admit(obj.GetNamespace()); err != nil {
		r.mu.Unlock()
		return "", fault.Retry(pulumiv1.ReasonSourceUnavailable, "cannot store the artifact of %s %q: %v", obj.GetKind(), obj.GetName(), err)
	}
	f := &fetch{done: make(chan struct{})}
	if r.inflight == nil {
		r.inflight = map[fetchKey]*fetch{}
	}
	r.inflight[key] = f
	r.mu.Unlock()

	f.digest, f.err = r.download(ctx, obj, pub)

	r.mu.Lock()
	delete(r.inflight, key)
	if f.err == nil {
		r.rememberLocked(key, f.digest)
	}
	joined := f.joined
	r.mu.Unlock()
	close(f.done)
	ctrl.LoggerFrom(ctx).V(1).Info("Downloaded Flux artifact", "source", obj.GetKind()+"/"+obj.GetName(), "digest", f.digest, "waitingStacks", joined)
	return f.digest, f.err
}

func (r *Resolver) rememberLocked(key fetchKey, digest string) {
	if r.stored == nil {
		r.stored = map[types.UID]storedArtifact{}
	}
	r.stored[key.uid] = storedArtifact{declared: key.declared, digest: digest}
}

// download fetches pub.url into the store, verifying the declared digest as the bytes are
// written so that a mismatching tarball is never stored.
func (r *Resolver) download(ctx context.Context, obj *unstructured.Unstructured, pub published) (string, error) {
	what := fmt.Sprintf("%s %q", obj.GetKind(), obj.GetName())
	u, err := url.Parse(pub.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fault.Stall(pulumiv1.ReasonSourceUnavailable, "%s publishes artifact url %q, which is not an http(s) URL", what, pub.url)
	}
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pub.url, nil)
	if err != nil {
		return "", fmt.Errorf("failed to build request for %s: %w", pub.url, err)
	}
	hc := r.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return "", fault.Retry(pulumiv1.ReasonSourceUnavailable, "failed to download the artifact of %s: %v", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// 404 is the usual one: source-controller garbage-collected the file just before a
		// newer status reached us.
		return "", fault.Retry(pulumiv1.ReasonSourceUnavailable, "failed to download the artifact of %s from %s: %s", what, pub.url, resp.Status)
	}
	if resp.ContentLength > r.maxBytes() {
		return "", r.tooLarge(obj, pub, fmt.Sprintf("is %d bytes", resp.ContentLength))
	}

	digest := pub.digest
	if strings.HasPrefix(pub.digest, "sha256:") {
		err = r.Store.PutVerified(resp.Body, r.maxBytes(), pub.digest)
	} else {
		// The store addresses content by sha256 only; for the other algorithms the stream
		// is checked against the declared digest at its end, which fails the Put before
		// anything is stored.
		digest, err = r.Store.Put(newVerifyingReader(resp.Body, pub.digest), r.maxBytes())
	}
	switch {
	case errors.Is(err, artifact.ErrDigestMismatch):
		return "", fault.Retry(pulumiv1.ReasonSourceUnavailable,
			"digest mismatch: the artifact of %s at revision %s downloaded from %s does not match status.artifact digest %s; nothing was stored (%v)",
			what, pub.revision, pub.url, pub.digest, err)
	case errors.Is(err, artifact.ErrTooLarge):
		return "", r.tooLarge(obj, pub, "is larger than that")
	case err != nil:
		return "", fault.Retry(pulumiv1.ReasonSourceUnavailable, "failed to download the artifact of %s from %s: %v", what, pub.url, err)
	}
	ctrl.LoggerFrom(ctx).Info("Stored Flux artifact", "kind", obj.GetKind(), "name", obj.GetName(),
		"revision", pub.revision, "digest", digest, "url", pub.url, "duration", time.Since(start).String())
	return digest, nil
}

// verifyingReader fails the read that reaches the end of r unless everything read hashes to
// the declared digest.
type verifyingReader struct {
	r        io.Reader
	h        hash.Hash
	declared string
	algo     string
}

// newVerifyingReader takes a digest readArtifact accepted, so its algorithm is known.
func newVerifyingReader(r io.Reader, declared string) *verifyingReader {
	algo, _, _ := strings.Cut(declared, ":")
	h := sha512.New()
	if algo == "sha384" {
		h = sha512.New384()
	}
	return &verifyingReader{r: r, h: h, declared: declared, algo: algo}
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if got := v.algo + ":" + hex.EncodeToString(v.h.Sum(nil)); got != v.declared {
			return n, fmt.Errorf("failed to verify artifact: content has digest %s, want %s: %w", got, v.declared, artifact.ErrDigestMismatch)
		}
	}
	return n, err
}

// cleanDir turns spec.fluxSource.dir into the slash-separated path of a directory inside
// the artifact: "" for its root, never absolute, never above it.
func cleanDir(dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	if path.IsAbs(dir) {
		return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.fluxSource.dir %q must be relative to the artifact's root", dir)
	}
	c := path.Clean(dir)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.fluxSource.dir %q points outside the artifact", dir)
	}
	if c == "." {
		return "", nil
	}
	return c, nil
}
