// Package v1alpha1 holds the stackwright.dev/v1alpha1 API: the Update kind, the durable
// record of one engine operation on one Stack; Policies and ClusterPolicies; and
// StackTemplates, the self-service kinds a platform team publishes, with the spec and
// status every such kind's instances share.
//
// +kubebuilder:object:generate=true
// +groupName=stackwright.dev
package v1alpha1
