package manager_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The manager caches Updates without their log tail and managedFields, and every object
// without managedFields, while the API server keeps them all: the runner's merge patches
// write what the trimmed cache does not hold, and the Stack still converges.
func TestManager_Cache_TrimsWhatTheManagerNeverReads(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	opts := testOptions(t)
	opts.WatchNamespaces, opts.LeaderElectionID = []string{ns}, "stackwright-cache-test"
	mgr := startManager(t, env.Config, opts)
	stack := createHello(t, ns, "trim", nil)
	waitReady(t, stack, "the Stack never became Ready")

	var stored v1alpha1.UpdateList
	g.Expect(env.Client.List(t.Context(), &stored, client.InNamespace(ns))).To(Succeed())
	g.Expect(stored.Items).To(HaveLen(1))
	u := stored.Items[0]
	g.Expect(u.Status.LogTail).NotTo(BeEmpty(), "the API server lost the log tail")
	g.Expect(u.ManagedFields).NotTo(BeEmpty())

	var cached v1alpha1.Update
	g.Eventually(func(g Gomega) {
		g.Expect(mgr.GetCache().Get(t.Context(), client.ObjectKeyFromObject(&u), &cached)).To(Succeed())
		g.Expect(cached.ResourceVersion).To(Equal(u.ResourceVersion))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(cached.Status.LogTail).To(BeEmpty(), "the cache holds the log tail")
	g.Expect(cached.ManagedFields).To(BeEmpty(), "the cache holds managedFields")
	g.Expect(cached.Status.Phase).To(Equal(u.Status.Phase))
	g.Expect(cached.Status.Conditions).To(Equal(u.Status.Conditions))

	var cachedStack pulumiv1.Stack
	g.Expect(mgr.GetCache().Get(t.Context(), client.ObjectKeyFromObject(stack), &cachedStack)).To(Succeed())
	g.Expect(cachedStack.ManagedFields).To(BeEmpty(), "the cache holds a Stack's managedFields")
}

// secretRequests counts the manager's requests about Secrets: reads of each by name, and
// lists and watches, noting whether each asked for metadata only.
type secretRequests struct {
	mu         sync.Mutex
	gets       map[string]int
	fullWatchs int // lists and watches of whole Secrets
	metaWatchs int // lists and watches of their metadata only
}

func (s *secretRequests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		path := req.URL.Path
		if i := strings.Index(path, "/secrets"); i >= 0 && req.Method == http.MethodGet {
			name := strings.TrimPrefix(path[i+len("/secrets"):], "/")
			s.mu.Lock()
			switch {
			case name != "":
				s.gets[name]++
			case strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadata"):
				s.metaWatchs++
			default:
				s.fullWatchs++
			}
			s.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (s *secretRequests) reads(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets[name]
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The manager never lists or watches whole Secrets, so a namespace's unrelated Secrets
// cost it their metadata alone: it reads the Secrets Stacks reference, once per
// resourceVersion however often the Stack is reconciled, and a change of one still re-runs
// its Stack at once.
func TestManager_Secrets_OnlyMetadataWatchedAndReferencedOnesRead(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	requests := &secretRequests{gets: map[string]int{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = requests.wrap
	opts := testOptions(t)
	opts.WatchNamespaces, opts.LeaderElectionID = []string{ns}, "stackwright-secrets-test"
	startManager(t, cfg, opts)

	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}, StringData: map[string]string{"k": "v"}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, StringData: map[string]string{"password": "first"}})).To(Succeed())
	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "secretive", Namespace: ns}}
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"password": {Type: "String"}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"length": {Raw: []byte(`"${password}"`)}}
	stack := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "secretive", Namespace: ns},
		Spec: pulumiv1.StackSpec{
			Stack: "secretive", ProgramRef: &pulumiv1.ProgramReference{Name: "secretive"},
			SecretsRef: map[string]pulumiv1.ResourceRef{"password": {Type: pulumiv1.ResourceSelectorSecret, ResourceSelector: pulumiv1.ResourceSelector{Secret: &pulumiv1.SecretSelector{Name: "db", Key: "password"}}}},
		},
	}
	g.Expect(env.Client.Create(ctx, prog)).To(Succeed())
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	waitReady(t, stack, "the Stack never became Ready")

	// Reconciled again and again (an annotation changes each time): the value is read
	// again only if it changed.
	settled := requests.reads("db")
	for i := range 3 {
		st := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), st)).To(Succeed())
		patch := client.MergeFrom(st.DeepCopy())
		st.SetAnnotations(map[string]string{"test.stackwright.dev/poke": fmt.Sprint(i)})
		g.Expect(env.Client.Patch(ctx, st, patch)).To(Succeed())
		time.Sleep(time.Second)
	}
	g.Expect(requests.reads("db")).To(Equal(settled), "an unchanged Secret was read again")

	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, sec)).To(Succeed())
	sec.StringData = map[string]string{"password": "second"}
	g.Expect(env.Client.Update(ctx, sec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		var updates v1alpha1.UpdateList
		g.Expect(env.Client.List(ctx, &updates, client.InNamespace(ns))).To(Succeed())
		g.Expect(updates.Items).To(HaveLen(2), "the changed Secret re-ran the Stack")
	}).WithTimeout(time.Minute).Should(Succeed())
	waitReady(t, stack, "the Stack never became Ready again")

	g.Expect(requests.reads("db")).To(BeNumerically(">", settled), "the changed Secret was not read")
	g.Expect(requests.reads("unrelated")).To(BeZero(), "a Secret no Stack references was read")
	requests.mu.Lock()
	defer requests.mu.Unlock()
	g.Expect(requests.fullWatchs).To(BeZero(), "whole Secrets were listed or watched")
	g.Expect(requests.metaWatchs).To(BeNumerically(">", 0), "Secrets' metadata was not watched")
}
