// Package v1alpha1 holds the stackwright.dev/v1alpha1 API: the Update kind,
// the durable record of one engine operation on one Stack.
//
// +kubebuilder:object:generate=true
// +groupName=stackwright.dev
package v1alpha1
