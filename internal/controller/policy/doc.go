// Package policy reconciles Policies and ClusterPolicies: it compiles each generation's
// Rego module and reports, in the Ready condition, whether it compiles, so that a broken
// guardrail is visible on the policy itself and not only on the Stacks it stops.
package policy
