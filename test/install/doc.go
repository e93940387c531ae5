// Package install tests the install artifacts without a cluster: the kustomize
// configurations under config/, the checked-in deploy/install.yaml and the Helm chart in
// charts/stackwright are rendered with ./bin/kubectl and ./bin/helm, and checked for the
// restricted security context, the RBAC scope each mode promises, and the chart's values
// schema. Outside CI (CI unset) the tests skip when those binaries are missing.
package install
