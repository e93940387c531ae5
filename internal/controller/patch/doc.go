// Package patch writes controllers' changes back to the API server as merge patches
// against the last state the controller read or wrote, so a reconcile can persist its
// intent midway (before creating an Update, before a slow phase) and again at the end
// without ever sending fields it did not change.
//
// Status and finalizers are patched separately: status through the status subresource,
// finalizers with an optimistic lock so another controller's finalizer is never dropped.
// A status write can ask for the lock too (crossplane's create-pending): the write that
// records an intent must fail, not win, when it was decided on a stale copy.
package patch
