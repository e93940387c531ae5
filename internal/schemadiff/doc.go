// Package schemadiff owns the judgement of whether a new OpenAPI v3 schema breaks objects
// written under an old one: Breaking compares two structural schemas (a StackTemplate's
// spec.parameters, say) and lists every change that could make a stored object invalid or
// make the API server prune part of it. The instances of a template kind are tenants' objects
// in etcd; a schema change that rejects or silently drops what they hold must be caught
// before the definition is written, not found on a tenant's next update.
//
// The judgement is conservative where containment cannot be decided (a changed pattern, a
// new CEL rule, a changed allOf): it reports the change. It never reports what only widens
// the schema (an optional property, a default, a wider enum, looser bounds, documentation).
// It is a pure function of the two schemas: no I/O, no API server, a deterministic result.
package schemadiff
