package patch

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Patcher patches one object for the length of one reconcile.
type Patcher struct {
	c     client.Client
	owner client.FieldOwner
	kind  string
	base  client.Object
	// stale is set once a locked write lost to a newer version: whatever this reconcile
	// still holds was decided on that old version and must not be written.
	stale error
}

// New returns a Patcher for obj as just read. kind names the object in errors.
func New(c client.Client, obj client.Object, kind string, fieldOwner string) *Patcher {
	return &Patcher{c: c, owner: client.FieldOwner(fieldOwner), kind: kind, base: obj.DeepCopyObject().(client.Object)}
}

// Option modifies a status write.
type Option func(*options)

type options struct{ lock bool }

// WithOptimisticLock makes the write fail with a conflict when the object changed since
// it was read: a decision made on a stale cache is then retried, not recorded.
func WithOptimisticLock() Option { return func(o *options) { o.lock = true } }

// Status writes obj's status if it differs from the last one read or written. An object
// that is already gone while being deleted has no status left to write. After a locked
// write was refused as stale, Status writes nothing and returns that refusal.
//
// Every write, locked or not, adopts the resourceVersion it produced, so a locked write
// detects changes made since this Patcher's last write: lock every write that precedes
// the one that must not be decided on a stale copy.
func (p *Patcher) Status(ctx context.Context, obj client.Object, opts ...Option) error {
	if p.stale != nil {
		return p.stale
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	changed, err := statusChanged(p.base, obj)
	if err != nil || !changed {
		return err
	}
	from := client.MergeFrom(p.base)
	if o.lock {
		from = client.MergeFromWithOptions(p.base, client.MergeFromWithOptimisticLock{})
	}
	target := obj.DeepCopyObject().(client.Object)
	if err := p.c.Status().Patch(ctx, target, from, p.owner); err != nil {
		if apierrors.IsNotFound(err) && obj.GetDeletionTimestamp() != nil {
			return nil
		}
		err = fmt.Errorf("failed to patch status of %s %s/%s: %w", p.kind, obj.GetNamespace(), obj.GetName(), err)
		if o.lock && apierrors.IsConflict(err) {
			p.stale = err
		}
		return err
	}
	p.rebase(obj, target.GetResourceVersion())
	return nil
}

// Finalizers writes obj's finalizers, with an optimistic lock so that a finalizer another
// controller added meanwhile is never dropped.
func (p *Patcher) Finalizers(ctx context.Context, obj client.Object) error {
	if p.stale != nil {
		return p.stale
	}
	target := p.base.DeepCopyObject().(client.Object)
	target.SetFinalizers(obj.GetFinalizers())
	from := client.MergeFromWithOptions(p.base, client.MergeFromWithOptimisticLock{})
	if err := p.c.Patch(ctx, target, from, p.owner); err != nil {
		return fmt.Errorf("failed to patch finalizers of %s %s/%s: %w", p.kind, obj.GetNamespace(), obj.GetName(), err)
	}
	p.base.SetFinalizers(target.GetFinalizers())
	p.base.SetResourceVersion(target.GetResourceVersion())
	obj.SetResourceVersion(target.GetResourceVersion())
	return nil
}

// rebase makes obj as written the new base. Finalizers stay as last written: only
// Finalizers persists them.
func (p *Patcher) rebase(obj client.Object, resourceVersion string) {
	finalizers := p.base.GetFinalizers()
	p.base = obj.DeepCopyObject().(client.Object)
	p.base.SetFinalizers(finalizers)
	p.base.SetResourceVersion(resourceVersion)
	obj.SetResourceVersion(resourceVersion)
}

// statusChanged compares the status as it would be sent: what only differs in memory (a
// timestamp's nanoseconds) is no change.
func statusChanged(a, b client.Object) (bool, error) {
	sa, err := statusJSON(a)
	if err != nil {
		return false, err
	}
	sb, err := statusJSON(b)
	if err != nil {
		return false, err
	}
	return string(sa) != string(sb), nil
}

func statusJSON(o client.Object) (json.RawMessage, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("failed to encode %T: %w", o, err)
	}
	var fields struct {
		Status json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, fmt.Errorf("failed to decode %T: %w", o, err)
	}
	return fields.Status, nil
}
