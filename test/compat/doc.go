// Package compat owns the PKO compatibility suite: manifests of our own, one per feature
// of the Pulumi Kubernetes Operator (PKO) that its examples and API use, each applied with
// strict field validation to Stackwright's CRDs on a real API server (envtest), with the
// install's guidance admission policy bound, and checked against the outcome written in
// its header: admitted (and with which warnings) or rejected (and why).
//
// The suite pins one rule above all: every manifest PKO's own CRDs admit is admitted by
// Stackwright's. Specs PKO admits but cannot run are admitted here too, with a guidance
// warning where one helps, so that no PKO user's `kubectl apply` breaks on moving over.
//
// The package holds no code besides its tests; see README.md for adding a case.
package compat
