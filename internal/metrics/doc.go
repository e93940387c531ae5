// Package metrics owns Stackwright's own Prometheus metrics, registered with
// controller-runtime's registry so the manager's metrics endpoint serves them next to the
// controller-runtime and client-go ones. Labels name namespaces and Stacks, never values
// read from Secrets or outputs.
package metrics
