// Package scheme builds the runtime.Scheme shared by the manager, the CLI and the tests:
// the Kubernetes built-ins plus every API group Stackwright serves (PKO's auto.pulumi.com Update included).
package scheme
