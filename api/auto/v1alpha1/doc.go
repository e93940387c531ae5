// Package v1alpha1 holds PKO v2's auto.pulumi.com/v1alpha1 Update kind, which Stackwright
// serves so that a PKO runbook's hand-made one-off operation (a preview, up, refresh or
// destroy of a Stack's workspace) runs unchanged: its spec.workspaceName names the Stack
// (PKO names a Stack's Workspace after it), the Stack controller runs it as an Update of
// that Stack, and its status reports the result in PKO's conditions (Progressing,
// Complete, Failed). The schema accepts what PKO's does; what cannot run is reported in the
// object's status, never refused at admission. PKO's Workspace kind is not served: a
// Stackwright Stack has no workspace Pod to describe.
//
// +kubebuilder:object:generate=true
// +groupName=auto.pulumi.com
package v1alpha1
