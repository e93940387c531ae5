// Package policy owns the policy guardrails: which Policies and ClusterPolicies select a
// Stack, and the in-process evaluation of their Rego modules against a preview's planned
// operations, with the builtins that reach the network or the manager's runtime removed.
package policy
