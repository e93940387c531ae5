// Package e2e holds the end-to-end tests (build tag e2e, `make e2e`): Stackwright
// installed from its own YAML and Helm chart into the real one-node cluster of
// `make cluster`, reconciling Stacks in its Pod.
package e2e
