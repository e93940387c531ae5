package manager_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// writeCounter counts the manager's writes to the API server by verb and resource (a
// Stack's status, an Update, a Secret, an event), leaving out leader election's.
type writeCounter struct {
	mu     sync.Mutex
	counts map[string]int
	// writes lists the counted writes in order, each as its kind, its object and, for an
	// event, its reason: what a failing bound is read against.
	writes []string
	// last is when the last write was counted.
	last time.Time
}

// resourceOf matches /apis/<group>/<version>/namespaces/<ns>/<resource>[/<name>[/<sub>]]:
// the resource, the name and the subresource.
var resourceOf = regexp.MustCompile(`/namespaces/[^/]+/([^/]+)(?:/([^/]+)(/[^/]+)?)?$`)

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet {
			if m := resourceOf.FindStringSubmatch(req.URL.Path); m != nil && m[1] != "leases" {
				key := req.Method + " " + m[1] + m[3]
				what := strings.TrimSpace(key + " " + m[2])
				if m[1] == "events" {
					if aboutProgram(req) {
						key += " (Program)"
					}
					what = key + " " + eventReason(req)
				}
				w.mu.Lock()
				w.counts[key]++
				w.writes = append(w.writes, what)
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

// eventReason is the reason of the event a request creates (protobuf, as the manager's
// client sends it), or "" for anything else (a series' patch).
func eventReason(req *http.Request) string {
	if req.GetBody == nil || req.Method != http.MethodPost {
		return ""
	}
	body, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer body.Close()
	raw, err := io.ReadAll(body)
	if err != nil {
		return ""
	}
	obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
	if ev, ok := obj.(*eventsv1.Event); err == nil && ok {
		return ev.Reason
	}
	return ""
}

// take returns the counts since the last take and the writes counted, in order, without
// the Program's own writes.
func (w *writeCounter) take() (map[string]int, int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var list []string
	for _, what := range w.writes {
		if !strings.HasPrefix(what, "PATCH programs/status") && !strings.Contains(what, "(Program)") {
			list = append(list, what)
		}
	}
	w.writes = nil
	out, total := w.counts, 0
	w.counts = map[string]int{}
	delete(out, "PATCH programs/status")
	delete(out, "POST events (Program)")
	for _, n := range out {
		total += n
	}
	return out, total, list
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
	settle := func(what string) (map[string]int, int) {
		// Whatever a last reconcile writes is counted with the Update it follows: the
		// writes are taken once none came for 2 s (a fixed wait let a loaded machine's
		// late write of one Update count against the next).
		g.Eventually(func() time.Duration {
			w.mu.Lock()
			defer w.mu.Unlock()
			return time.Since(w.last)
		}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(BeNumerically(">=", 2*time.Second))
		counts, total, list := w.take()
		t.Logf("writes for %s: %d %v", what, total, counts)
		for i, write := range list {
			t.Logf("  %d. %s", i+1, write)
		}
		return counts, total
	}
	settle("the first update")

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
	counts, total := settle("an up of a new desired state")
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
	counts, total = settle("a resync that changes nothing")
	g.Expect(total).To(BeNumerically("<=", 6), "writes: %v", counts)
	g.Expect(counts).NotTo(HaveKey("POST events"), fmt.Sprintf("a resync that changed nothing is no event: %v", counts))
}
