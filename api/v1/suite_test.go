package v1_test

import (
	"context"
	"os"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// readDocs splits a YAML file into its documents, skipping empty and comment-only ones.
func readDocs(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []*unstructured.Unstructured
	for i, doc := range docSeparator.Split(string(b), -1) {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, i, err)
		}
		if string(j) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatalf("%s: document %d: %v", path, i, err)
		}
		docs = append(docs, u)
	}
	return docs
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// warningRecorder collects the warnings the API server returns.
type warningRecorder struct {
	mu    sync.Mutex
	texts []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

func (w *warningRecorder) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.texts)
}

// warningClient returns a client whose API server warnings are recorded.
func warningClient(t *testing.T) (*warningRecorder, client.Client) {
	t.Helper()
	w := &warningRecorder{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return w, c
}
