package stack_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
)

// A Stack on a Flux GitRepository (referenced through v1beta2 while the cluster stores
// v1) deploys each revision the source publishes, woken by the watch on the source.
func TestStackReconciler_Reconcile_FluxSourceRevisions(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	var mu sync.Mutex
	files := map[string][]byte{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b, ok := files[r.URL.Path]
		mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	defer srv.Close()

	src := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
		"metadata": map[string]any{"name": "infra", "namespace": s.ns},
		"spec":     map[string]any{"interval": "1m", "url": "https://example.com/x"},
	}}
	if err := env.Client.Create(s.ctx(), src); err != nil {
		t.Fatal(err)
	}
	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "flux", Namespace: s.ns}, Spec: pulumiv1.StackSpec{
		Stack: "dev", DestroyOnFinalize: true,
		FluxSource: &pulumiv1.FluxSource{SourceRef: pulumiv1.FluxSourceReference{APIVersion: "source.toolkit.fluxcd.io/v1beta2", Kind: "GitRepository", Name: "infra"}, Dir: "proj"},
	}}
	s.create(st)
	s.waitCondition("flux", pulumiv1.ConditionSourceReady, metav1.ConditionFalse, pulumiv1.ReasonSourceUnavailable)

	publish := func(rev, greeting string) time.Time {
		body, err := artifact.Pack(map[string][]byte{"proj/Pulumi.yaml": []byte("name: fluxdemo\nruntime: yaml\noutputs:\n  greeting: " + greeting + "\n")})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		files["/"+rev+".tar.gz"] = body
		mu.Unlock()
		if err := env.Client.Get(s.ctx(), client.ObjectKey{Namespace: s.ns, Name: "infra"}, src); err != nil {
			t.Fatal(err)
		}
		now := metav1.Now().UTC().Format(time.RFC3339)
		src.Object["status"] = map[string]any{
			"observedGeneration": src.GetGeneration(),
			"artifact":           map[string]any{"path": "x", "url": srv.URL + "/" + rev + ".tar.gz", "revision": "main@sha1:" + rev, "digest": artifact.Digest(body), "lastUpdateTime": now},
			"conditions":         []any{map[string]any{"type": "Ready", "status": "True", "reason": "Succeeded", "message": "stored", "lastTransitionTime": now}},
		}
		if err := env.Client.Status().Update(s.ctx(), src); err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	check := func(rev, greeting string, since time.Time) {
		s.eventually(func(g Gomega) {
			got := s.get(g, "flux")
			g.Expect(got.Status.LastUpdate).NotTo(BeNil())
			g.Expect(got.Status.LastUpdate.LastSuccessfulCommit).To(Equal("main@sha1:" + rev))
			g.Expect(string(got.Status.Outputs["greeting"].Raw)).To(Equal(`"` + greeting + `"`))
		})
		t.Logf("revision %s deployed %s after publishing", rev, time.Since(since))
	}
	check("aaaa", "one", publish("aaaa", "one"))
	check("bbbb", "two", publish("bbbb", "two"))
}
