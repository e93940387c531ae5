// Package v1alpha1 serves PKO's older pulumi.com/v1alpha1 Stack, which GitOps repositories
// and blog posts written for PKO still use. Its schema is v1's (the same Go types), so the
// API server converts between the two by changing apiVersion alone; v1 is the storage
// version and the only one the controllers read.
//
// +kubebuilder:object:generate=true
// +groupName=pulumi.com
package v1alpha1
