package conversion

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/scheme"
)

func review(t *testing.T, desired string, objects ...map[string]any) []byte {
	t.Helper()
	req := &apiextensionsv1.ConversionRequest{UID: types.UID("uid-1"), DesiredAPIVersion: desired}
	for _, o := range objects {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		req.Objects = append(req.Objects, runtime.RawExtension{Raw: b})
	}
	b, err := json.Marshal(apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"}, Request: req,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestServer_ServeHTTP_Reviews(t *testing.T) {
	tmpl := &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "queues"},
		Spec:       v1alpha1.StackTemplateSpec{API: v1alpha1.TemplateAPI{Group: "example.org", Kind: "Queue", Plural: "queues"}, Versions: versions},
	}
	sch, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(sch).WithObjects(tmpl).Build()
	srv := &Server{Templates: c, Log: logr.Discard()}
	tests := []struct {
		name, path string
		body       []byte
		wantCode   int
		want       *apiextensionsv1.ConversionResponse
	}{
		{
			name: "converts every object", path: "/convert/queues",
			body:     review(t, "example.org/v3", instance(t, "example.org/v1", `{"size":2}`), instance(t, "example.org/v2", `{"replicas":4}`)),
			wantCode: http.StatusOK,
			want: &apiextensionsv1.ConversionResponse{
				UID: "uid-1", Result: metav1.Status{Status: metav1.StatusSuccess},
				ConvertedObjects: []runtime.RawExtension{{Raw: mustJSON(t, instance(t, "example.org/v3", `{"count":2}`))}, {Raw: mustJSON(t, instance(t, "example.org/v3", `{"count":4}`))}},
			},
		},
		{
			name: "an unknown template fails the review", path: "/convert/nope",
			body:     review(t, "example.org/v2", instance(t, "example.org/v1", `{}`)),
			wantCode: http.StatusOK,
			want:     &apiextensionsv1.ConversionResponse{UID: "uid-1", Result: metav1.Status{Status: metav1.StatusFailure, Message: "StackTemplate nope does not exist"}},
		},
		{
			name: "another group fails the review", path: "/convert/queues",
			body:     review(t, "other.org/v2", instance(t, "example.org/v1", `{}`)),
			wantCode: http.StatusOK,
			want:     &apiextensionsv1.ConversionResponse{UID: "uid-1", Result: metav1.Status{Status: metav1.StatusFailure, Message: "StackTemplate queues defines no kind of apiVersion other.org/v2"}},
		},
		{
			name: "another kind fails the review", path: "/convert/queues",
			body: review(t, "example.org/v2", func() map[string]any {
				o := instance(t, "example.org/v1", `{}`)
				o["kind"] = "Bucket"
				return o
			}()),
			wantCode: http.StatusOK,
			want:     &apiextensionsv1.ConversionResponse{UID: "uid-1", Result: metav1.Status{Status: metav1.StatusFailure, Message: `StackTemplate queues defines kind Queue, not "Bucket"`}},
		},
		{
			name: "an unknown version fails the review, naming the object", path: "/convert/queues",
			body:     review(t, "example.org/v7", instance(t, "example.org/v1", `{}`)),
			wantCode: http.StatusOK,
			want:     &apiextensionsv1.ConversionResponse{UID: "uid-1", Result: metav1.Status{Status: metav1.StatusFailure, Message: "failed to convert team-a/q: version v7 is not a version of the kind"}},
		},
		{name: "not a review", path: "/convert/queues", body: []byte(`{"request":null}`), wantCode: http.StatusBadRequest},
		{name: "another path", path: "/healthz", body: review(t, "example.org/v2"), wantCode: http.StatusNotFound},
		{name: "not a template name", path: "/convert/a/b", body: review(t, "example.org/v2"), wantCode: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodPost, tt.path, bytes.NewReader(tt.body)))
			if rec.Code != tt.wantCode {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantCode, rec.Body)
			}
			if tt.want == nil {
				return
			}
			var got apiextensionsv1.ConversionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got.Kind != "ConversionReview" || got.APIVersion != "apiextensions.k8s.io/v1" {
				t.Errorf("answered a %s %s", got.APIVersion, got.Kind)
			}
			if diff := cmp.Diff(tt.want, got.Response, cmp.Comparer(func(a, b runtime.RawExtension) bool { return jsonEqual(t, a.Raw, b.Raw) })); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServer_ServeHTTP_OnlyPost(t *testing.T) {
	rec := httptest.NewRecorder()
	(&Server{Log: logr.Discard()}).ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/convert/queues", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET answered %d", rec.Code)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return cmp.Equal(x, y)
}
