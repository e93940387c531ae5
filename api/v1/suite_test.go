package v1_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

// readDocs splits a YAML file into its objects, skipping empty and comment-only documents.
func readDocs(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	docs, err := kubetest.ReadDocs(path)
	if err != nil {
		t.Fatal(err)
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

// warningClient returns a client and a context whose requests through it record the API
// server's warnings in the returned Warnings.
func warningClient(t *testing.T) (context.Context, *kubetest.Warnings, client.Client) {
	t.Helper()
	w := &kubetest.Warnings{}
	return kubetest.WithWarnings(testContext(t), w), w, env.WarningClient(t)
}
