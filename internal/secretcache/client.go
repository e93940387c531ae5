package secretcache

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var secretGVK = corev1.SchemeGroupVersion.WithKind("Secret")

// DefaultMaxBytes bounds the values Client remembers: past it, it starts again empty,
// which costs one API read per Secret on its next use.
const DefaultMaxBytes = 64 << 20

// Client is a client.Client whose Gets of Secrets are answered from the values it read
// before, while the metadata cache shows them unchanged, and from the API server
// otherwise. Everything else goes to the wrapped client.
type Client struct {
	client.Client
	meta     client.Reader // the cache of Secrets' metadata
	live     client.Reader // the API server
	maxBytes int

	mu     sync.Mutex
	values map[client.ObjectKey]*corev1.Secret
	bytes  int
}

// New wraps c. meta reads metav1.PartialObjectMetadata of Secrets from the manager's cache
// (which then watches Secrets' metadata); live reads from the API server.
func New(c client.Client, meta, live client.Reader) *Client {
	return &Client{Client: c, meta: meta, live: live, maxBytes: DefaultMaxBytes, values: map[client.ObjectKey]*corev1.Secret{}}
}

// Get answers Secrets from memory when their resourceVersion has not moved.
func (c *Client) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok && m.GroupVersionKind() == secretGVK && len(opts) == 0 {
		// The watched metadata: the wrapped client would bypass its cache for Secrets.
		return c.meta.Get(ctx, key, obj)
	}
	sec, ok := obj.(*corev1.Secret)
	if !ok || len(opts) > 0 {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	current := &metav1.PartialObjectMetadata{}
	current.SetGroupVersionKind(secretGVK)
	if err := c.meta.Get(ctx, key, current); err != nil {
		// Not found in the cache may be a Secret created a moment ago: the API server
		// is the judge.
		return c.read(ctx, key, sec)
	}
	c.mu.Lock()
	known, hit := c.values[key]
	if hit && known.ResourceVersion == current.ResourceVersion {
		known.DeepCopyInto(sec)
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	return c.read(ctx, key, sec)
}

// read gets the Secret from the API server and remembers it.
func (c *Client) read(ctx context.Context, key client.ObjectKey, sec *corev1.Secret) error {
	if err := c.live.Get(ctx, key, sec); err != nil {
		c.forget(key)
		return err
	}
	size := sizeOf(sec)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.values[key]; ok {
		c.bytes -= sizeOf(old)
	}
	if c.bytes+size > c.maxBytes {
		clear(c.values)
		c.bytes = 0
	}
	c.values[key] = sec.DeepCopy()
	c.bytes += size
	return nil
}

func (c *Client) forget(key client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.values[key]; ok {
		c.bytes -= sizeOf(old)
		delete(c.values, key)
	}
}

func sizeOf(sec *corev1.Secret) int {
	n := 0
	for k, v := range sec.Data {
		n += len(k) + len(v)
	}
	for k, v := range sec.StringData {
		n += len(k) + len(v)
	}
	return n
}

// Create, Update, Patch and Delete forget what they change, so that the writer's next read
// does not answer with the value it just replaced while the metadata cache lags.

// Create creates obj.
func (c *Client) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	defer c.forgetObject(obj)
	return c.Client.Create(ctx, obj, opts...)
}

// Update updates obj.
func (c *Client) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	defer c.forgetObject(obj)
	return c.Client.Update(ctx, obj, opts...)
}

// Patch patches obj.
func (c *Client) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	defer c.forgetObject(obj)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// Delete deletes obj.
func (c *Client) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	defer c.forgetObject(obj)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *Client) forgetObject(obj client.Object) {
	if _, ok := obj.(*corev1.Secret); ok {
		c.forget(client.ObjectKeyFromObject(obj))
	}
}
