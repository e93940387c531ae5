package kubetest

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Write is one write a client made to a namespaced object.
type Write struct {
	// Verb is the request's method: POST, PUT, PATCH or DELETE.
	Verb string
	// Resource is the resource, and Sub its subresource ("status"), if any.
	Resource, Sub string
	// Name is the object's, "" for a creation (the name is in the body).
	Name string
	// Regarding is the kind an event is about, and Reason its reason; "" for other writes
	// and for an event series' patch.
	Regarding, Reason string
}

// Kind is the write's verb and resource: "PATCH stacks/status", "POST events".
func (w Write) Kind() string {
	k := w.Verb + " " + w.Resource
	if w.Sub != "" {
		k += "/" + w.Sub
	}
	return k
}

// String is the write as a test logs it: its kind, its object and an event's reason.
func (w Write) String() string {
	return strings.Join(strings.Fields(w.Kind()+" "+w.Name+" "+w.Regarding+" "+w.Reason), " ")
}

// Writes records, by namespace and in order, the writes of the clients whose transport it
// wraps (rest.Config.WrapTransport), leaving out leader election's Leases: what an
// operation costs the API server and etcd. The zero value is ready.
type Writes struct {
	mu   sync.Mutex
	byNS map[string][]Write
	last map[string]time.Time
}

// writePath matches /api[s]/.../namespaces/<ns>/<resource>[/<name>[/<sub>]].
var writePath = regexp.MustCompile(`/namespaces/([^/]+)/([^/]+)(?:/([^/]+)(?:/([^/]+))?)?$`)

// Wrap wraps rt, a client's transport, to record its writes.
func (w *Writes) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet {
			if m := writePath.FindStringSubmatch(req.URL.Path); m != nil && m[2] != "leases" {
				write := Write{Verb: req.Method, Resource: m[2], Name: m[3], Sub: m[4]}
				if write.Resource == "events" && req.Method == http.MethodPost {
					write.Regarding, write.Reason = eventOf(req)
				}
				w.add(m[1], write)
			}
		}
		return rt.RoundTrip(req)
	})
}

func (w *Writes) add(ns string, write Write) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byNS == nil {
		w.byNS, w.last = map[string][]Write{}, map[string]time.Time{}
	}
	w.byNS[ns] = append(w.byNS[ns], write)
	w.last[ns] = time.Now()
}

// Take returns the writes to objects of namespace ns since the last Take, and forgets them.
func (w *Writes) Take(ns string) []Write {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.byNS[ns]
	delete(w.byNS, ns)
	return out
}

// Quiet is how long no object of namespace ns was written; a namespace never written to
// has been quiet for ever (so Settle takes its writes at once: none).
func (w *Writes) Quiet(ns string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Since(w.last[ns])
}

// Settle waits until no object of namespace ns was written for quiet (a minute at most),
// then takes the writes made there: whatever a last reconcile writes is counted with the
// operation it follows, which a fixed wait does not ensure on a loaded machine.
func (w *Writes) Settle(t testing.TB, ns string, quiet time.Duration) []Write {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); w.Quiet(ns) < quiet; time.Sleep(quiet / 10) {
		if time.Now().After(deadline) {
			t.Fatalf("objects of namespace %s were still being written a minute on", ns)
		}
	}
	return w.Take(ns)
}

// eventOf reads the kind an event creation is about and its reason: the manager's clients
// send events as protobuf, tests' as JSON, and either decodes.
func eventOf(req *http.Request) (regarding, reason string) {
	if req.GetBody == nil {
		return "", ""
	}
	body, err := req.GetBody()
	if err != nil {
		return "", ""
	}
	defer func() { _ = body.Close() }()
	raw, err := io.ReadAll(body)
	if err != nil {
		return "", ""
	}
	obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(bytes.Clone(raw), nil, nil)
	if ev, ok := obj.(*eventsv1.Event); err == nil && ok {
		return ev.Regarding.Kind, ev.Reason
	}
	return "", ""
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
