package kubetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var env *Env

func TestMain(m *testing.M) { Main(m, &env) }

// The object goes through the real API server and etcd: it gets a UID and a
// resourceVersion, its free-form config survives storage, and an unknown kind is refused.
func TestEnv_Client_RoundTripsStackThroughAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := env.Namespace(t)

	spec := map[string]any{
		"stack":      "dev",
		"programRef": map[string]any{"name": "prog"},
		"config": map[string]any{
			"app:replicas": int64(3),
			"app:tags":     []any{"a", "b"},
			"app:nested":   map[string]any{"enabled": true},
		},
	}
	in := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pulumi.com/v1",
		"kind":       "Stack",
		"metadata":   map[string]any{"name": "smoke", "namespace": ns},
		"spec":       spec,
	}}
	if err := env.Client.Create(ctx, in); err != nil {
		t.Fatalf("failed to create Stack: %v", err)
	}

	out := &unstructured.Unstructured{}
	out.SetGroupVersionKind(in.GroupVersionKind())
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "smoke"}, out); err != nil {
		t.Fatalf("failed to get Stack: %v", err)
	}
	if out.GetUID() == "" || out.GetResourceVersion() == "" {
		t.Errorf("stored Stack has uid %q resourceVersion %q; want both set by the API server", out.GetUID(), out.GetResourceVersion())
	}
	if diff := cmp.Diff(spec, out.Object["spec"]); diff != "" {
		t.Errorf("spec changed in storage (-sent +stored):\n%s", diff)
	}

	bogus := &unstructured.Unstructured{}
	bogus.SetGroupVersionKind(schema.GroupVersionKind{Group: "pulumi.com", Version: "v1", Kind: "NoSuchKind"})
	bogus.SetNamespace(ns)
	bogus.SetName("x")
	if err := env.Client.Create(ctx, bogus); err == nil || apierrors.IsAlreadyExists(err) {
		t.Errorf("creating an unregistered kind returned %v; want a discovery error from the API server", err)
	}
}

// A crashed etcd or kube-apiserver comes back in place with its data, its address and the
// clients' credentials: what a control plane's restart keeps. The second etcd restart is of
// the process the first one started.
func TestEnv_Restart_KeepsObjectsAddressAndCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := env.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}, Data: map[string]string{"k": "v"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Component{Etcd, APIServer, Etcd} {
		before, err := env.restarts.pid(c)
		if err != nil {
			t.Fatal(err)
		}
		env.Restart(t, c, time.Second)
		after, err := env.restarts.pid(c)
		if err != nil {
			t.Fatal(err)
		}
		if after == before {
			t.Fatalf("%s still runs as pid %d after its restart", c, before)
		}
		var got corev1.ConfigMap
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), &got); err != nil {
			t.Fatalf("after restarting %s: %v", c, err)
		}
		if diff := cmp.Diff(cm.Data, got.Data); diff != "" {
			t.Errorf("after restarting %s, ConfigMap data (-want +got):\n%s", c, diff)
		}
	}
}
