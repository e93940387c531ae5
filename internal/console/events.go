package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// watchedKind is a kind whose changes the pages show.
type watchedKind struct {
	gvk schema.GroupVersionKind
	// namespaced kinds are watched in the kubeconfig's namespace when the person may not
	// watch them in every namespace.
	namespaced bool
}

var watched = []watchedKind{
	{pulumiv1.GroupVersion.WithKind("Stack"), true},
	{v1alpha1.GroupVersion.WithKind("Update"), true},
	{v1alpha1.GroupVersion.WithKind("StackRollout"), true},
	{v1alpha1.GroupVersion.WithKind("StackTemplate"), false},
}

const (
	// heartbeat keeps proxies and the browser from closing an idle stream, and finds a
	// stream whose browser is gone.
	heartbeat = 20 * time.Second
	// rewatchDelay spaces the watches of a kind that keeps failing.
	rewatchDelay = 2 * time.Second
)

// change is one event of the stream: which object changed. It never carries the object:
// the page reads its view again, through the API and its checks.
type change struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Error is why a kind cannot be watched (the API's words); the page shows it.
	Error string `json:"error,omitempty"`
}

// events streams the changes of the watched kinds, as Server-Sent Events, until the page
// goes away. Each kind is watched with metadata only, where its list is allowed (every
// namespace, or the kubeconfig's); a kind the person may not watch is reported once.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	changes := make(chan change, 64)
	started := make(chan struct{}, len(watched))
	for _, k := range watched {
		go s.watchKind(ctx, k, changes, started)
	}
	for range watched {
		select {
		case <-started:
		case <-ctx.Done():
			return
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	// A first event once every kind is watched (or known not to be), so the page reads its
	// view once more: whatever changed between its first read and the watches is then shown,
	// and whatever changes from now on is sent.
	fmt.Fprint(w, "event: ready\ndata: {}\n\n")
	flusher.Flush()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil {
				return
			}
		case c := <-changes:
			b, _ := json.Marshal(c) // strings only: cannot fail
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return
			}
		}
		flusher.Flush()
	}
}

// watchKind sends a change for every event of k until ctx ends, watching again from a
// fresh list when a watch ends (the API server closes them after a while, or its
// resourceVersion expired): a change is then sent too, since events may have been missed.
// It signals started once its first watch is established or has failed.
func (s *Server) watchKind(ctx context.Context, k watchedKind, changes chan<- change, started chan<- struct{}) {
	gvk := k.gvk
	once := sync.OnceFunc(func() { started <- struct{}{} })
	defer once()
	send := func(c change) bool {
		select {
		case changes <- c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	first := true
	for ctx.Err() == nil {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		var sc scope
		var err error
		if k.namespaced {
			sc, err = s.list(ctx, list, gvk.Kind+"s")
		} else {
			err = s.env.Client.List(ctx, list)
		}
		var w watch.Interface
		if err == nil {
			opts := &client.ListOptions{Namespace: sc.Namespace, Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}}
			w, err = s.watcher.Watch(ctx, list, opts)
		}
		once()
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
			// Rights do not come back during a session; the page says which kind is blind.
			send(change{Kind: gvk.Kind, Error: err.Error()})
			return
		case err != nil:
			if !sleep(ctx, rewatchDelay) {
				return
			}
			continue
		}
		if !first && !send(change{Kind: gvk.Kind}) {
			w.Stop()
			return
		}
		first = false
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				break
			}
			m, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if !ok || ev.Type == watch.Bookmark {
				continue
			}
			if !send(change{Kind: gvk.Kind, Namespace: m.Namespace, Name: m.Name}) {
				break
			}
		}
		w.Stop()
	}
}

// sleep waits d, or until ctx ends: false then.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
