// Package v1 holds the pulumi.com/v1 API served by Stackwright: the Stack and
// Program kinds. The JSON shape is kept wire-compatible with the Pulumi
// Kubernetes Operator (PKO) so that existing PKO manifests apply unchanged;
// fields Stackwright adds live under spec.stackwright.
//
// +kubebuilder:object:generate=true
// +groupName=pulumi.com
package v1
