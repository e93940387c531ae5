package manager_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/gitwebhook"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

func literalRef(v string) pulumiv1.ResourceRef {
	return pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorLiteral, ResourceSelector: pulumiv1.ResourceSelector{Literal: &pulumiv1.LiteralRef{Value: v}}}
}

// A push announced by the git host's webhook is deployed at once, although the Stack
// polls its branch only every hour: the manager's endpoint checks the signature against
// the namespace's Secret, pokes the repository's cached listing and reconciles the Stack.
func TestManager_GitWebhook_PushIsDeployedWithoutWaitingForThePoll(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	opts := testOptions(t)
	opts.GitWebhookAddr = freeAddr(t)
	startManager(t, env.Config, opts)
	ns := env.Namespace(t)
	served, root := t.TempDir(), t.TempDir()
	repo, first := gitserver.NewRepo(t, served, "app", map[string]string{"Pulumi.yaml": fileProject("app", "first")})
	server := gitserver.NewHTTPServer(t, served, nil)
	const token = "the-namespace-webhook-secret"
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gitwebhook.SecretName},
		StringData: map[string]string{gitwebhook.SecretKey: token},
	})).To(Succeed())
	stack := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hooked"},
		Spec: pulumiv1.StackSpec{
			Stack: "hooked", GitSource: pulumiv1.GitSource{ProjectRepo: server.URL + "/app.git", Branch: "main"},
			ResyncFrequencySeconds: 3600,
			EnvRefs:                map[string]pulumiv1.ResourceRef{"STACKWRIGHT_TESTING_ROOT": literalRef(root)},
		},
	}
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	deployed := func(commit, content string) {
		t.Helper()
		NewWithT(t).Eventually(func(g Gomega) {
			st := &pulumiv1.Stack{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), st)).To(Succeed())
			g.Expect(st.Status.LastUpdate).NotTo(BeNil())
			g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal(commit))
			b, err := os.ReadFile(filepath.Join(root, "hooked.txt"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(b)).To(Equal(content))
		}).WithTimeout(2*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "commit %s not deployed", commit)
	}
	deployed(first, "first")

	second := repo.Commit(map[string]string{"Pulumi.yaml": fileProject("app", "second")})
	push := func(secret string) int {
		body, err := json.Marshal(map[string]any{"ref": "refs/heads/main", "repository": map[string]any{"clone_url": server.URL + "/app.git"}})
		g.Expect(err).NotTo(HaveOccurred())
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+opts.GitWebhookAddr+"/hooks/git/"+ns, bytes.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		var code int
		// The endpoint starts with the manager's leadership, shortly after the test's.
		NewWithT(t).Eventually(func() error {
			resp, err := http.DefaultClient.Do(req.Clone(ctx))
			if err == nil {
				code = resp.StatusCode
				_ = resp.Body.Close()
			}
			return err
		}).WithTimeout(30 * time.Second).Should(Succeed())
		return code
	}
	g.Expect(push("not-the-secret")).To(Equal(http.StatusUnauthorized))
	g.Consistently(func(g Gomega) {
		st := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), st)).To(Succeed())
		g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal(first))
	}).WithTimeout(3*time.Second).Should(Succeed(), "a push with a wrong signature changed nothing")
	g.Expect(push(token)).To(Equal(http.StatusAccepted))
	deployed(second, "second")
}

// fluxSink is notification-controller's event endpoint as far as the manager can tell:
// it keeps every event posted to it.
type fluxSink struct {
	mu     sync.Mutex
	events []map[string]any
	raw    []string
}

func (s *fluxSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var e map[string]any
	if json.Unmarshal(b, &e) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.events, s.raw = append(s.events, e), append(s.raw, string(b))
	s.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// With --events-addr, the events the controllers record reach Flux's event endpoint in
// Flux's format, tied to the Update they are about, and a Stack's secret configuration
// reaches none of them.
func TestManager_EventsAddr_PostsStackEventsInFluxsFormat(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	sink := &fluxSink{}
	srv := httptest.NewServer(sink)
	t.Cleanup(srv.Close)
	opts := testOptions(t)
	opts.EventsAddr = srv.URL + "/"
	startManager(t, env.Config, opts)
	ns := env.Namespace(t)

	const canary = "flux-Ev3nt-canary-secret"
	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: ns}}
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"pass": {Type: "String"}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"leak": {Raw: []byte(`"${pass}"`)}, "missing": {Raw: []byte(`"${nowhere.value}"`)}}
	stack := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: ns},
		Spec: pulumiv1.StackSpec{
			Stack: "broken", ProgramRef: &pulumiv1.ProgramReference{Name: "broken"},
			SecretsRef: map[string]pulumiv1.ResourceRef{"pass": literalRef(canary)},
		},
	}
	g.Expect(env.Client.Create(ctx, prog)).To(Succeed())
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())

	var failed map[string]any
	g.Eventually(func(g Gomega) {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		for _, e := range sink.events {
			obj, _ := e["involvedObject"].(map[string]any)
			if e["reason"] == "UpdateFailed" && obj["name"] == "broken" && obj["namespace"] == ns {
				failed = e
			}
		}
		g.Expect(failed).NotTo(BeNil(), "no UpdateFailed event posted")
	}).WithTimeout(2 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	obj := failed["involvedObject"].(map[string]any)
	g.Expect(obj["kind"]).To(Equal("Stack"))
	g.Expect(obj["apiVersion"]).To(Equal("pulumi.com/v1"))
	g.Expect(failed["severity"]).To(Equal("error"))
	g.Expect(failed["reportingController"]).To(Equal("stackwright"))
	meta, _ := failed["metadata"].(map[string]any)
	var updates v1alpha1.UpdateList
	g.Expect(env.Client.List(ctx, &updates, client.InNamespace(ns))).To(Succeed())
	var names []string
	for _, u := range updates.Items {
		names = append(names, u.Name)
	}
	g.Expect(names).To(ContainElement(meta["pulumi.com/update"]), "the event names its Update")
	g.Expect(meta).To(HaveKey("pulumi.com/revision"))
	g.Expect(meta).To(HaveKeyWithValue("pulumi.com/operation", "up"))
	g.Expect(meta).To(HaveKey("pulumi.com/token"))
	sink.mu.Lock()
	all := strings.Join(sink.raw, "\n")
	sink.mu.Unlock()
	g.Expect(all).NotTo(ContainSubstring(canary), "a secret reached an event posted to Flux")
}
