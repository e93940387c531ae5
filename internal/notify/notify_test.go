package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// sink stands in for notification-controller's event receiver: it keeps what is posted
// and answers with statuses in turn, the last one from then on.
type sink struct {
	srv      *httptest.Server
	statuses []int

	mu    sync.Mutex
	posts []post
}

type post struct {
	method, contentType string
	body                []byte
}

func newSink(t *testing.T, statuses ...int) *sink {
	t.Helper()
	s := &sink{statuses: statuses}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading posted event: %v", err)
		}
		s.mu.Lock()
		s.posts = append(s.posts, post{method: r.Method, contentType: r.Header.Get("Content-Type"), body: b})
		status := s.statuses[min(len(s.posts), len(s.statuses))-1]
		s.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.posts)
}

func (s *sink) events(t *testing.T) []Event {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
	for _, p := range s.posts {
		var ev Event
		if err := json.Unmarshal(p.body, &ev); err != nil {
			t.Fatalf("decoding posted event: %v", err)
		}
		out = append(out, ev)
	}
	return out
}

func newTestForwarder(t *testing.T, address string) *Forwarder {
	t.Helper()
	f, err := NewForwarder(address, "stackwright", "stackwright-0")
	if err != nil {
		t.Fatal(err)
	}
	f.firstBackoff = time.Millisecond
	f.flushTimeout = 2 * time.Second
	return f
}

// run starts f and returns the function that stops it and waits for Start to return.
func run(t *testing.T, f *Forwarder) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

var allResults = []string{ResultDelivered, ResultDuplicate, ResultFailed, ResultDropped}

func results() map[string]float64 {
	m := map[string]float64{}
	for _, r := range allResults {
		m[r] = testutil.ToFloat64(forwarded.WithLabelValues(r))
	}
	return m
}

func since(before map[string]float64) map[string]float64 {
	m := results()
	for r := range m {
		m[r] -= before[r]
	}
	return m
}

func counted(before map[string]float64) float64 {
	var n float64
	for _, v := range since(before) {
		n += v
	}
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func stack() *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "uid-web", ResourceVersion: "42"},
		Spec:       pulumiv1.StackSpec{Stack: "dev", Backend: "s3://secret-bucket"},
	}
}

func update(revision string) *v1alpha1.Update {
	return &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-7f3c"},
		Spec:       v1alpha1.UpdateSpec{StackName: "web", Type: v1alpha1.UpdateTypeUp, Revision: revision, ProjectDir: "infra"},
	}
}

func stackRef() corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: "pulumi.com/v1", Kind: "Stack", Namespace: "team", Name: "web", UID: "uid-web", ResourceVersion: "42"}
}

func TestRecorder_Eventf_Forwards(t *testing.T) {
	instance := &unstructured.Unstructured{}
	instance.SetAPIVersion("platform.example.com/v1")
	instance.SetKind("Database")
	instance.SetNamespace("team")
	instance.SetName("orders")
	unknown := &unstructured.Unstructured{}
	unknown.SetNamespace("team")
	unknown.SetName("orders")

	tests := []struct {
		name              string
		regarding         runtime.Object
		related           runtime.Object
		eventtype, reason string
		note              string
		args              []any
		want              []Event
	}{{
		name:      "warning about a Stack with its Update is an error carrying the Update",
		regarding: stack(), related: update("main@sha1:abc123"),
		eventtype: corev1.EventTypeWarning, reason: "UpdateFailed",
		note: "Update %s failed: %s", args: []any{"web-7f3c", "exit status 1"},
		want: []Event{{
			InvolvedObject: stackRef(), Severity: SeverityError,
			Message: "Update web-7f3c failed: exit status 1", Reason: "UpdateFailed",
			Metadata: map[string]string{
				"pulumi.com/revision":  "main@sha1:abc123",
				"pulumi.com/update":    "web-7f3c",
				"pulumi.com/operation": "up",
				"pulumi.com/token":     token("UpdateFailed", "web-7f3c"),
			},
			ReportingController: "stackwright", ReportingInstance: "stackwright-0",
		}},
	}, {
		name:      "normal event is info and carries only the token",
		regarding: stack(), eventtype: corev1.EventTypeNormal, reason: "UpdateSucceeded", note: "Stack is up to date",
		want: []Event{{
			InvolvedObject: stackRef(), Severity: SeverityInfo, Message: "Stack is up to date", Reason: "UpdateSucceeded",
			Metadata:            map[string]string{"pulumi.com/token": token("UpdateSucceeded", "")},
			ReportingController: "stackwright", ReportingInstance: "stackwright-0",
		}},
	}, {
		name:      "Update without a revision leaves revision out",
		regarding: stack(), related: update(""), eventtype: corev1.EventTypeNormal, reason: "PreviewAwaitingApproval", note: "Preview done",
		want: []Event{{
			InvolvedObject: stackRef(), Severity: SeverityInfo, Message: "Preview done", Reason: "PreviewAwaitingApproval",
			Metadata: map[string]string{
				"pulumi.com/update":    "web-7f3c",
				"pulumi.com/operation": "up",
				"pulumi.com/token":     token("PreviewAwaitingApproval", "web-7f3c"),
			},
			ReportingController: "stackwright", ReportingInstance: "stackwright-0",
		}},
	}, {
		name:      "template instance keeps its own kind and group",
		regarding: instance, eventtype: corev1.EventTypeWarning, reason: "RevisionNotOpened", note: "%s", args: []any{"100%"},
		want: []Event{{
			InvolvedObject: corev1.ObjectReference{APIVersion: "platform.example.com/v1", Kind: "Database", Namespace: "team", Name: "orders"},
			Severity:       SeverityError, Message: "100%", Reason: "RevisionNotOpened",
			Metadata:            map[string]string{"platform.example.com/token": token("RevisionNotOpened", "")},
			ReportingController: "stackwright", ReportingInstance: "stackwright-0",
		}},
	}, {
		name: "nil regarding is not forwarded", eventtype: corev1.EventTypeWarning, reason: "Failed", note: "gone",
	}, {
		name:      "cluster-scoped object is not forwarded: no Alert can match it",
		regarding: &v1alpha1.StackTemplate{ObjectMeta: metav1.ObjectMeta{Name: "db"}},
		eventtype: corev1.EventTypeWarning, reason: "Invalid", note: "bad",
	}, {
		name:      "object of unknown kind is not forwarded",
		regarding: unknown, eventtype: corev1.EventTypeWarning, reason: "Failed", note: "bad",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestForwarder(t, "http://127.0.0.1:1/")
			next := events.NewFakeRecorder(1)
			start := time.Now().Truncate(time.Second)

			f.Recorder(next).Eventf(tt.regarding, tt.related, tt.eventtype, tt.reason, "Reconcile", tt.note, tt.args...)

			select {
			case got := <-next.Events:
				if want := fmt.Sprintf(tt.eventtype+" "+tt.reason+" "+tt.note, tt.args...); got != want {
					t.Errorf("next recorded %q, want %q", got, want)
				}
			default:
				t.Error("next recorded nothing")
			}
			var got []Event
			for len(f.queue) > 0 {
				ev := <-f.queue
				if ev.Timestamp.Time.Before(start) || ev.Timestamp.After(time.Now()) {
					t.Errorf("timestamp %v, want about now", ev.Timestamp)
				}
				got = append(got, ev)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Event{}, "Timestamp")); diff != "" {
				t.Errorf("queued events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecorder_Eventf_TokenTellsUpdatesApart(t *testing.T) {
	f := newTestForwarder(t, "http://127.0.0.1:1/")
	rec := f.Recorder(events.NewFakeRecorder(4))
	other := update("main@sha1:abc123")
	other.Name = "web-9a1b"
	for _, u := range []*v1alpha1.Update{update("main@sha1:abc123"), update("main@sha1:abc123"), other} {
		rec.Eventf(stack(), u, corev1.EventTypeWarning, "UpdateFailed", "Reconcile", "failed")
	}
	rec.Eventf(stack(), update("main@sha1:abc123"), corev1.EventTypeWarning, "Stalled", "Reconcile", "failed")
	var got []string
	for len(f.queue) > 0 {
		got = append(got, (<-f.queue).Metadata["pulumi.com/token"])
	}
	if len(got) != 4 || got[0] != got[1] || got[1] == got[2] || got[1] == got[3] {
		t.Errorf("tokens %q: want the same for the same reason and Update, different otherwise", got)
	}
}

func TestRecorder_Eventf_NilForwarderIsNext(t *testing.T) {
	var f *Forwarder
	next := events.NewFakeRecorder(1)
	if got := f.Recorder(next); got != next {
		t.Errorf("Recorder of a nil Forwarder = %T, want next itself", got)
	}
}

func TestRecorder_Eventf_FullQueueDropsWithoutBlocking(t *testing.T) {
	f := newTestForwarder(t, "http://127.0.0.1:1/")
	f.queue = make(chan Event, 2)
	next := events.NewFakeRecorder(5)
	before := results()
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec := f.Recorder(next)
		for range 5 {
			rec.Eventf(stack(), nil, corev1.EventTypeWarning, "Stalled", "Reconcile", "stalled")
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Eventf blocked on a full queue")
	}
	if diff := cmp.Diff(map[string]float64{ResultDropped: 3}, since(before), ignoreZero); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if got := len(next.Events); got != 5 {
		t.Errorf("next recorded %d events, want 5", got)
	}
}

var ignoreZero = cmpopts.IgnoreMapEntries(func(_ string, v float64) bool { return v == 0 })

func TestForwarder_Start_Results(t *testing.T) {
	tests := []struct {
		name      string
		statuses  []int
		closed    bool
		wantPosts int
		want      string
	}{
		{name: "accepted", statuses: []int{http.StatusAccepted}, wantPosts: 1, want: ResultDelivered},
		{name: "server errors are retried until accepted", statuses: []int{500, 500, 202}, wantPosts: 3, want: ResultDelivered},
		{name: "429 is a duplicate discarded by the rate limiter, not retried", statuses: []int{429, 202}, wantPosts: 1, want: ResultDuplicate},
		{name: "400 fails without retry", statuses: []int{400, 202}, wantPosts: 1, want: ResultFailed},
		{name: "server errors on every attempt fail", statuses: []int{503}, wantPosts: attempts, want: ResultFailed},
		{name: "connection refused fails after retries", statuses: []int{202}, closed: true, want: ResultFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSink(t, tt.statuses...)
			if tt.closed {
				s.srv.Close()
			}
			f := newTestForwarder(t, s.srv.URL+"/")
			before := results()
			stop := run(t, f)

			f.Recorder(nil).Eventf(stack(), update("r1"), corev1.EventTypeWarning, "UpdateFailed", "Reconcile", "failed")
			waitFor(t, "a result", func() bool { return counted(before) > 0 })
			stop()

			if got := s.count(); got != tt.wantPosts {
				t.Errorf("posted %d times, want %d", got, tt.wantPosts)
			}
			if diff := cmp.Diff(map[string]float64{tt.want: 1}, since(before), ignoreZero); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
		})
	}
}

// The posted JSON has the field names of Flux's event/v1beta1.Event, written out here so
// that a renamed tag in Event fails the test.
func TestForwarder_Start_PostsFluxEventJSON(t *testing.T) {
	s := newSink(t, http.StatusAccepted)
	f := newTestForwarder(t, s.srv.URL+"/")
	before := results()
	stop := run(t, f)

	f.Recorder(nil).Eventf(stack(), update("main@sha1:abc123"), corev1.EventTypeWarning, "UpdateFailed", "Reconcile", "Update %s failed", "web-7f3c")
	waitFor(t, "a result", func() bool { return counted(before) > 0 })
	stop()

	if s.count() != 1 {
		t.Fatalf("posted %d times, want 1", s.count())
	}
	p := s.posts[0]
	if p.method != http.MethodPost || p.contentType != "application/json" {
		t.Errorf("request %s with Content-Type %q, want POST with application/json", p.method, p.contentType)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(p.body, &fields); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(fields))
	wantKeys := []string{"involvedObject", "message", "metadata", "reason", "reportingController", "reportingInstance", "severity", "timestamp"}
	if diff := cmp.Diff(wantKeys, keys); diff != "" {
		t.Errorf("JSON fields (-want +got):\n%s", diff)
	}

	var got struct {
		InvolvedObject      corev1.ObjectReference `json:"involvedObject"`
		Severity            string                 `json:"severity"`
		Timestamp           metav1.Time            `json:"timestamp"`
		Message             string                 `json:"message"`
		Reason              string                 `json:"reason"`
		Metadata            map[string]string      `json:"metadata"`
		ReportingController string                 `json:"reportingController"`
		ReportingInstance   string                 `json:"reportingInstance"`
	}
	if err := json.Unmarshal(p.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Timestamp.IsZero() {
		t.Error("timestamp is zero")
	}
	got.Timestamp = metav1.Time{}
	want := got
	want.InvolvedObject = stackRef()
	want.Severity, want.Message, want.Reason = "error", "Update web-7f3c failed", "UpdateFailed"
	want.Metadata = map[string]string{
		"pulumi.com/revision": "main@sha1:abc123", "pulumi.com/update": "web-7f3c",
		"pulumi.com/operation": "up", "pulumi.com/token": token("UpdateFailed", "web-7f3c"),
	}
	want.ReportingController, want.ReportingInstance = "stackwright", "stackwright-0"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("posted event (-want +got):\n%s", diff)
	}
	if strings.Contains(string(p.body), "secret-bucket") || strings.Contains(string(p.body), "infra") {
		t.Errorf("posted event carries spec values: %s", p.body)
	}
}

func TestForwarder_Start_FlushesQueueOnShutdown(t *testing.T) {
	s := newSink(t, http.StatusAccepted)
	f := newTestForwarder(t, s.srv.URL+"/")
	for _, reason := range []string{"A", "B", "C"} {
		f.Recorder(nil).Eventf(stack(), nil, corev1.EventTypeNormal, reason, "Reconcile", "note")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range s.events(t) {
		got = append(got, ev.Reason)
	}
	if diff := cmp.Diff([]string{"A", "B", "C"}, got); diff != "" {
		t.Errorf("reasons posted (-want +got):\n%s", diff)
	}
}

func TestForwarder_Start_DropsWhatIsLeftAtFlushDeadline(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	f := newTestForwarder(t, srv.URL+"/")
	f.flushTimeout = 50 * time.Millisecond
	for range 3 {
		f.Recorder(nil).Eventf(stack(), nil, corev1.EventTypeWarning, "Stalled", "Reconcile", "stalled")
	}
	before := results()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start := time.Now()
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Start returned %v after ctx was done, want about the flush timeout", took)
	}
	if diff := cmp.Diff(map[string]float64{ResultFailed: 1, ResultDropped: 2}, since(before), ignoreZero); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

func TestForwarder_NeedLeaderElection_False(t *testing.T) {
	if newTestForwarder(t, "http://127.0.0.1:1/").NeedLeaderElection() {
		t.Error("NeedLeaderElection = true, want false: followers' events would be lost")
	}
}

func TestNewForwarder_Validation(t *testing.T) {
	tests := []struct {
		name, address, controller string
		wantErr                   string
	}{
		{name: "in-cluster service", address: "http://notification-controller.flux-system.svc.cluster.local./", controller: "stackwright"},
		{name: "https with port", address: "https://nc.example.com:8443/events", controller: "stackwright"},
		{name: "empty address", address: "", controller: "stackwright", wantErr: `failed to parse notification-controller address: scheme "" is not http or https`},
		{name: "no scheme", address: "notification-controller:80", controller: "stackwright", wantErr: `scheme "notification-controller" is not http or https`},
		{name: "other scheme", address: "ftp://nc.example.com/", controller: "stackwright", wantErr: `scheme "ftp" is not http or https`},
		{name: "no host", address: "http:///events", controller: "stackwright", wantErr: "failed to parse notification-controller address: no host"},
		{name: "port without host", address: "http://:9292/", controller: "stackwright", wantErr: "no host"},
		{name: "unparsable", address: "http://[::1", controller: "stackwright", wantErr: "failed to parse notification-controller address: parse"},
		{name: "no reporting controller", address: "http://nc/", wantErr: "no reporting controller"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewForwarder(tt.address, tt.controller, "stackwright-0")
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("NewForwarder: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("NewForwarder error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
