package secretcache

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// countingReader counts the reads that reach the API server.
type countingReader struct {
	client.Reader
	gets int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
	return r.Reader.Get(ctx, key, obj, opts...)
}

func newSecret(name, value string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}, Data: map[string][]byte{"password": []byte(value)}}
}

func TestClient_Get_ReadsTheAPIServerOnlyWhenTheSecretChanged(t *testing.T) {
	ctx := t.Context()
	api := fake.NewClientBuilder().WithObjects(newSecret("db", "first")).Build()
	live := &countingReader{Reader: api}
	// The fake client answers PartialObjectMetadata from the same objects, as the
	// manager's metadata informer would.
	c := New(api, api, live)
	key := client.ObjectKey{Namespace: "team", Name: "db"}
	get := func() string {
		t.Helper()
		sec := &corev1.Secret{}
		if err := c.Get(ctx, key, sec); err != nil {
			t.Fatal(err)
		}
		return string(sec.Data["password"])
	}

	var got []string
	var reads []int
	step := func() {
		got = append(got, get())
		reads = append(reads, live.gets)
	}
	step() // first read: the API server
	step() // unchanged: from memory
	changed := &corev1.Secret{}
	if err := api.Get(ctx, key, changed); err != nil {
		t.Fatal(err)
	}
	changed.Data["password"] = []byte("second")
	if err := api.Update(ctx, changed); err != nil {
		t.Fatal(err)
	}
	step() // a new resourceVersion: the API server
	step() // unchanged again: from memory
	if diff := cmp.Diff([]string{"first", "first", "second", "second"}, got); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 1, 2, 2}, reads); diff != "" {
		t.Errorf("API reads after each Get (-want +got):\n%s", diff)
	}

	// A value handed out is a copy: changing it changes nothing remembered.
	sec := &corev1.Secret{}
	if err := c.Get(ctx, key, sec); err != nil {
		t.Fatal(err)
	}
	sec.Data["password"] = []byte("scribbled")
	if v := get(); v != "second" {
		t.Errorf("after the caller changed its copy Get() = %q, want second", v)
	}

	// A write through the Client forgets the value it replaces.
	if err := c.Update(ctx, newSecretAt(sec, "third")); err != nil {
		t.Fatal(err)
	}
	before := live.gets
	if v := get(); v != "third" || live.gets != before+1 {
		t.Errorf("after Update Get() = %q with %d API reads, want third with 1", v, live.gets-before)
	}

	// Deleted: NotFound, as the API server says.
	if err := api.Delete(ctx, newSecret("db", "")); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get() of a deleted Secret = %v, want NotFound", err)
	}
}

func newSecretAt(sec *corev1.Secret, value string) *corev1.Secret {
	out := sec.DeepCopy()
	out.Data["password"] = []byte(value)
	return out
}

// Other kinds are not remembered: they go to the wrapped client.
func TestClient_Get_OtherKindsGoToTheWrappedClient(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "cfg"}, Data: map[string]string{"a": "1"}}
	api := fake.NewClientBuilder().WithObjects(cm).Build()
	live := &countingReader{Reader: api}
	c := New(api, api, live)
	got := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(cm), got); err != nil {
		t.Fatal(err)
	}
	if got.Data["a"] != "1" || live.gets != 0 {
		t.Errorf("Get(ConfigMap) = %v with %d reads of the live reader, want the wrapped client's answer", got.Data, live.gets)
	}
}

// Past its bound the memory starts again empty rather than growing.
func TestClient_Get_BoundedMemory(t *testing.T) {
	api := fake.NewClientBuilder().WithObjects(newSecret("a", "0123456789"), newSecret("b", "0123456789")).Build()
	c := New(api, api, api)
	c.maxBytes = 30 // one Secret of 18 bytes fits, two do not
	for _, name := range []string{"a", "b"} {
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: "team", Name: name}, &corev1.Secret{}); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.values) != 1 || c.bytes != 18 {
		t.Errorf("remembered %d Secrets, %d bytes; want 1 and 18", len(c.values), c.bytes)
	}
}
