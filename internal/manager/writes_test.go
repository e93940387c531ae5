package manager_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// writeCounter counts the manager's writes to the API server by verb and resource (a
// Stack's status, an Update, a Secret, an event), leaving out leader election's.
type writeCounter struct {
	mu     sync.Mutex
	counts map[string]int
	// last is when the last write was counted.
	last time.Time
}

// resourceOf turns /apis/<group>/<version>/namespaces/<ns>/<resource>[/<name>[/<sub>]] into
// <resource>[/<sub>].
var resourceOf = regexp.MustCompile(`/namespaces/[^/]+/([^/]+)(?:/[^/]+(/[^/]+)?)?$`)

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet {
			if m := resourceOf.FindStringSubmatch(req.URL.Path); m != nil && m[1] != "leases" {
				key := req.Method + " " + m[1] + m[2]
				if m[1] == "events" && aboutProgram(req) {
					key += " (Program)"
				}
				w.mu.Lock()
				w.counts[key]++
				w.last = time.Now()
				w.mu.Unlock()
			}
		}
		return rt.RoundTrip(req)
	})
}

// aboutProgram reports whether an event's body regards a Program: the manager's client
// sends protobuf, where an ObjectReference's kind is field 1.
func aboutProgram(req *http.Request) bool {
	if req.GetBody == nil {
		return false
	}
	body, err := req.GetBody()
	if err != nil {
		return false
	}
	defer body.Close()
	raw, err := io.ReadAll(body)
	return err == nil && bytes.Contains(raw, []byte("\n\x07Program"))
}

// take returns the counts since the last take, without the Program's own writes.
func (w *writeCounter) take() (map[string]int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out, total := w.counts, 0
	w.counts = map[string]int{}
	delete(out, "PATCH programs/status")
	delete(out, "POST events (Program)")
	for _, n := range out {
		total += n
	}
	return out, total
}

// The API writes an Update costs, which at fleet scale are etcd's load: an up of a new
// desired state writes the Stack's status twice (intent, result), the Update three times
// (created, running, result), its outputs Secret and two events; a resync that changes
// nothing writes no event.
func TestManager_Writes_PerUpdateAreBounded(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	w := &writeCounter{counts: map[string]int{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = w.wrap
	opts := testOptions(t)
	opts.WatchNamespaces, opts.LeaderElectionID = []string{ns}, "stackwright-writes-test"
	startManager(t, cfg, opts)
	stack := createHello(t, ns, "w", nil)
	waitReady(t, stack, "the first update")
	settle := func() (map[string]int, int) {
		// Whatever a last reconcile writes is counted with the Update it follows: the
		// writes are taken once none came for 2 s (a fixed wait let a loaded machine's
		// late write of one Update count against the next).
		g.Eventually(func() time.Duration {
			w.mu.Lock()
			defer w.mu.Unlock()
			return time.Since(w.last)
		}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(BeNumerically(">=", 2*time.Second))
		return w.take()
	}
	settle()

	prog := &pulumiv1.Program{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "w"}, prog)).To(Succeed())
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"greeting": {Raw: []byte(`"hello again"`)}}
	g.Expect(env.Client.Update(t.Context(), prog)).To(Succeed())
	g.Eventually(func(g Gomega) {
		st := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(stack), st)).To(Succeed())
		g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal("generation/2"))
		g.Expect(st.Status.Conditions).To(ContainElement(HaveField("Type", pulumiv1.ConditionReady)))
	}).WithTimeout(time.Minute).Should(Succeed())
	waitReady(t, stack, "the new program")
	counts, total := settle()
	t.Logf("writes for an up of a new desired state: %d %v", total, counts)
	g.Expect(total).To(BeNumerically("<=", 8), "writes: %v", counts)

	st := &pulumiv1.Stack{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(stack), st)).To(Succeed())
	p := client.MergeFrom(st.DeepCopy())
	st.Annotations = map[string]string{pulumiv1.ReconcileRequestAnnotation: "resync-1"}
	g.Expect(env.Client.Patch(t.Context(), st, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(stack), st)).To(Succeed())
		g.Expect(st.Status.LastUpdate.ReconcileRequest).To(Equal("resync-1"))
	}).WithTimeout(time.Minute).Should(Succeed())
	waitReady(t, stack, "the resync")
	counts, total = settle()
	t.Logf("writes for a resync that changes nothing: %d %v", total, counts)
	g.Expect(total).To(BeNumerically("<=", 6), "writes: %v", counts)
	g.Expect(counts).NotTo(HaveKey("POST events"), fmt.Sprintf("a resync that changed nothing is no event: %v", counts))
}
