package conversion

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// PathPrefix is where the webhook takes a template's reviews: PathPrefix + the template's
// name.
const PathPrefix = "/convert/"

// MaxReviewBytes bounds a ConversionReview's body. The API server converts a list of
// instances in one review; this is room for many at etcd's 1.5 MiB per object.
const MaxReviewBytes = 64 << 20

// Server answers the API server's ConversionReviews for the kinds of templates whose
// versions rename parameters. It runs on every replica, leader or not: the Service in
// front of it reaches any of them.
type Server struct {
	// Listener is where it serves HTTPS.
	Listener net.Listener
	// Cert is its serving certificate (tlscert.LoadOrCreate).
	Cert tls.Certificate
	// Templates reads the StackTemplates whose kinds it converts.
	Templates client.Reader
	Log       logr.Logger
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: standbys serve too.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	srv := &http.Server{
		Handler:           s,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{s.Cert}},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(s.Listener, "", "") }()
	select {
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown) //nolint:contextcheck // ctx is done: shutting down needs its own
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("failed to serve conversion webhook: %w", err)
	}
}

// ServeHTTP answers one ConversionReview: every object converted, or the review failed
// with why (the API server then fails the request that needed it, with that message).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
	if !ok || len(validation.IsDNS1123Subdomain(name)) > 0 {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	review := &apiextensionsv1.ConversionReview{}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxReviewBytes))
	if err := dec.Decode(review); err != nil || review.Request == nil {
		http.Error(w, "the body is not a ConversionReview with a request", http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	objects, err := s.convert(r.Context(), name, review.Request)
	if err != nil {
		s.Log.Error(err, "Conversion failed", "template", name, "desiredAPIVersion", review.Request.DesiredAPIVersion)
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
	} else {
		resp.ConvertedObjects = objects
	}
	w.Header().Set("Content-Type", "application/json")
	out := apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: resp}
	if err := json.NewEncoder(w).Encode(out); err != nil {
		s.Log.Error(err, "Failed to write conversion response", "template", name)
	}
}

// convert converts the request's objects with the versions of template name.
func (s *Server) convert(ctx context.Context, name string, req *apiextensionsv1.ConversionRequest) ([]runtime.RawExtension, error) {
	t := &v1alpha1.StackTemplate{}
	if err := s.Templates.Get(ctx, client.ObjectKey{Name: name}, t); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("StackTemplate %s does not exist", name)
		}
		return nil, fmt.Errorf("failed to get StackTemplate %s: %w", name, err)
	}
	group, to, ok := strings.Cut(req.DesiredAPIVersion, "/")
	if !ok || group != t.Spec.API.Group {
		return nil, fmt.Errorf("StackTemplate %s defines no kind of apiVersion %s", name, req.DesiredAPIVersion)
	}
	versions := t.KindVersions()
	out := make([]runtime.RawExtension, 0, len(req.Objects))
	for i, raw := range req.Objects {
		obj := map[string]any{}
		if err := json.Unmarshal(raw.Raw, &obj); err != nil {
			return nil, fmt.Errorf("failed to decode object %d: %w", i, err)
		}
		if kind, _ := obj["kind"].(string); kind != t.Spec.API.Kind {
			return nil, fmt.Errorf("StackTemplate %s defines kind %s, not %q", name, t.Spec.API.Kind, kind)
		}
		if err := Convert(obj, group, versions, to); err != nil {
			return nil, fmt.Errorf("failed to convert %s: %w", describe(obj), err)
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("failed to encode %s: %w", describe(obj), err)
		}
		out = append(out, runtime.RawExtension{Raw: b})
	}
	return out, nil
}

// describe names an object in an error: namespace/name.
func describe(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	return ns + "/" + name
}
