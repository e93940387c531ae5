package flux

import (
	"context"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/fault"
)

// artifactServer stands in for source-controller's artifact server, on loopback.
type artifactServer struct {
	*httptest.Server

	mu    sync.Mutex
	files map[string]served
	hits  map[string]int
	// arrived receives the path of every request as it arrives.
	arrived chan string
}

type served struct {
	body []byte
	// streamed sends the body without Content-Length, as a proxy re-chunking it would.
	streamed bool
	// gate, when set, holds the response until it is closed.
	gate chan struct{}
}

func newArtifactServer(t *testing.T) *artifactServer {
	t.Helper()
	s := &artifactServer{files: map[string]served{}, hits: map[string]int{}, arrived: make(chan string, 100)}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	return s
}

func (s *artifactServer) handle(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	f, ok := s.files[req.URL.Path]
	s.hits[req.URL.Path]++
	s.mu.Unlock()
	select {
	case s.arrived <- req.URL.Path:
	default:
	}
	if !ok {
		http.NotFound(w, req)
		return
	}
	if f.gate != nil {
		<-f.gate
	}
	if f.streamed {
		// Writing before the handler returns, then flushing, makes net/http chunk the body.
		_, _ = w.Write(f.body[:1])
		w.(http.Flusher).Flush()
		_, _ = w.Write(f.body[1:])
		return
	}
	_, _ = w.Write(f.body)
}

// serve publishes body at path and returns its URL.
func (s *artifactServer) serve(path string, f served) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = f
	return s.URL + path
}

func (s *artifactServer) requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// createSource creates a Flux source object with a spec like the ones Flux users write and
// no status, as it is before source-controller first reconciles it.
func createSource(t *testing.T, ctx context.Context, ns, apiVersion, kind, name string) *unstructured.Unstructured {
	t.Helper()
	spec := map[string]any{"interval": "5m0s"}
	switch kind {
	case "GitRepository":
		spec["url"] = "https://github.com/example/infra"
		spec["ref"] = map[string]any{"branch": "main"}
	case "OCIRepository":
		spec["url"] = "oci://ghcr.io/example/infra"
		spec["ref"] = map[string]any{"tag": "latest"}
	case "Bucket":
		spec["bucketName"] = "infra"
		spec["endpoint"] = "minio.example.com"
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       spec,
	}}
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatalf("failed to create %s %s: %v", kind, name, err)
	}
	return obj
}

// publish writes status the way source-controller does, through the status subresource.
func publish(t *testing.T, ctx context.Context, obj *unstructured.Unstructured, status map[string]any) {
	t.Helper()
	obj.Object["status"] = status
	if err := env.Client.Status().Update(ctx, obj); err != nil {
		t.Fatalf("failed to update status of %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

// artifactStatus is source-controller's status.artifact for a stored tarball.
func artifactStatus(obj *unstructured.Unstructured, url, revision string, body []byte) map[string]any {
	return map[string]any{
		"path":           strings.ToLower(obj.GetKind()) + "/" + obj.GetNamespace() + "/" + obj.GetName() + "/artifact.tar.gz",
		"url":            url,
		"revision":       revision,
		"digest":         artifact.Digest(body),
		"lastUpdateTime": metav1.Now().UTC().Format(time.RFC3339),
		"size":           int64(len(body)),
	}
}

// readyStatus is the status of a source whose latest reconcile stored art.
func readyStatus(obj *unstructured.Unstructured, art map[string]any) map[string]any {
	msg := "stored artifact for revision '" + art["revision"].(string) + "'"
	return map[string]any{
		"observedGeneration": obj.GetGeneration(),
		"artifact":           art,
		"conditions": []any{
			condition(obj, "Ready", "True", "Succeeded", msg),
			condition(obj, "ArtifactInStorage", "True", "Succeeded", msg),
		},
	}
}

func condition(obj *unstructured.Unstructured, typ, status, reason, msg string) map[string]any {
	return map[string]any{
		"type": typ, "status": status, "reason": reason, "message": msg,
		"observedGeneration": obj.GetGeneration(),
		"lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339),
	}
}

// project packs a Pulumi YAML project under dir (which may be "") with marker in its
// Pulumi.yaml, plus a file outside it, as a repository holding more than one project would.
func project(t *testing.T, dir, marker string) []byte {
	t.Helper()
	name := "Pulumi.yaml"
	if dir != "" {
		name = dir + "/" + name
	}
	b, err := artifact.Pack(map[string][]byte{
		name:        []byte("name: " + marker + "\nruntime: yaml\n"),
		"README.md": []byte("infrastructure\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// incompressible returns a tarball of about n bytes.
func incompressible(t *testing.T, n int) []byte {
	t.Helper()
	noise := make([]byte, n)
	_, _ = rand.Read(noise)
	b, err := artifact.Pack(map[string][]byte{"Pulumi.yaml": []byte("name: big\nruntime: yaml\n"), "noise": noise})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha512Digest(b []byte) string {
	sum := sha512.Sum512(b)
	return "sha512:" + hex.EncodeToString(sum[:])
}

func fluxStack(ns, name, apiVersion, kind, source, dir string) *pulumiv1.Stack {
	s := &pulumiv1.Stack{}
	s.Namespace, s.Name = ns, name
	s.Spec.Stack = "dev"
	s.Spec.FluxSource = &pulumiv1.FluxSource{
		SourceRef: pulumiv1.FluxSourceReference{APIVersion: apiVersion, Kind: kind, Name: source},
		Dir:       dir,
	}
	return s
}

func newResolver(t *testing.T, srv *artifactServer, maxBytes int64) *Resolver {
	t.Helper()
	store, err := artifact.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &Resolver{Client: env.Client, Store: store, HTTP: srv.Client(), MaxBytes: maxBytes}
}

// wantFault fails unless err is a fault with that reason and stall-ness whose message
// contains msg.
func wantFault(t *testing.T, err error, reason string, stalled bool, msg string) {
	t.Helper()
	f, ok := fault.As(err)
	if !ok {
		t.Fatalf("Resolve() error = %v; want a %s fault", err, reason)
	}
	if f.Reason != reason || f.Stalled != stalled {
		t.Errorf("Resolve() fault = %s (stalled %t): %v; want %s (stalled %t)", f.Reason, f.Stalled, f, reason, stalled)
	}
	if !strings.Contains(f.Error(), msg) {
		t.Errorf("Resolve() message = %q; want it to contain %q", f.Error(), msg)
	}
}
