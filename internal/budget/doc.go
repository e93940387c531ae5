// Package budget owns the manager's memory budget for tenant input: bytes a tenant (or an
// unauthenticated caller) makes the manager hold in memory at once (git ref listings,
// runner reports, webhook bodies). Each stream has a cap of its own; the budget bounds
// their sum across every concurrent reconcile and request, so that many tenants at their
// caps together stay within the manager's memory limit. A stream that finds the budget
// spent fails at once, with an error its caller reports as transient, rather than waiting:
// waiting streams that each hold part of the budget could otherwise hold it all.
package budget
