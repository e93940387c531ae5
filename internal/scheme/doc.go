// Package scheme builds the runtime.Scheme shared by the manager, the CLI and the tests:
// the Kubernetes built-ins plus every Stackwright API group.
package scheme
