package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// Stack is PKO's pulumi.com/v1alpha1 Stack: v1's spec and status under the older version.
// The printer columns are v1's.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={pulumi,stackwright},shortName=stk
// +kubebuilder:printcolumn:name="Stack",type=string,priority=10,JSONPath=`.spec.stack`
// +kubebuilder:printcolumn:name="Last Update",type=string,JSONPath=`.status.lastUpdate.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.status.lastUpdate.lastResyncTime`
// +kubebuilder:printcolumn:name="Last Commit",type=string,priority=10,JSONPath=`.status.lastUpdate.lastAttemptedCommit`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reconciling",type=string,JSONPath=`.status.conditions[?(@.type=="Reconciling")].reason`
// +kubebuilder:printcolumn:name="Stalled",type=string,JSONPath=`.status.conditions[?(@.type=="Stalled")].reason`
// +kubebuilder:printcolumn:name="Permalink",type=string,JSONPath=`.status.lastUpdate.permalink`
// +kubebuilder:printcolumn:name="Suspended",type=string,priority=10,JSONPath=`.status.conditions[?(@.type=="Suspended")].status`
// +kubebuilder:printcolumn:name="Current Update",type=string,priority=10,JSONPath=`.status.currentUpdate.name`
// +kubebuilder:printcolumn:name="Deployed",type=string,priority=10,JSONPath=`.status.lastUpdate.lastSuccessfulCommit`
// +kubebuilder:printcolumn:name="Drift",type=string,priority=10,JSONPath=`.status.conditions[?(@.type=="DriftDetected")].status`
type Stack struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   pulumiv1.StackSpec   `json:"spec,omitempty"`
	Status pulumiv1.StackStatus `json:"status,omitempty"`
}

// StackList is a list of v1alpha1 Stacks.
//
// +kubebuilder:object:root=true
type StackList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Stack `json:"items"`
}
