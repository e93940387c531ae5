package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpdateType is the operation an Update asks for. The schema leaves it free, as PKO's
// does; a type other than these fails the Update (reason UnsupportedType).
type UpdateType string

// The operations PKO's Update kind names.
const (
	PreviewType UpdateType = "preview"
	UpType      UpdateType = "up"
	RefreshType UpdateType = "refresh"
	DestroyType UpdateType = "destroy"
)

// Condition types of an Update, PKO's: Progressing while it waits or runs, then Complete
// (with Failed saying how it ended).
const (
	ConditionProgressing = "Progressing"
	ConditionComplete    = "Complete"
	ConditionFailed      = "Failed"
)

// UpdateSpec is PKO's: the Stack (workspace) to operate on, the operation and its options.
type UpdateSpec struct {
	// WorkspaceName names the Stack, in the Update's namespace, to operate on (PKO names
	// a Stack's Workspace after the Stack).
	// +optional
	WorkspaceName string `json:"workspaceName,omitempty"`
	// StackName is the Pulumi stack to operate on; when set it must be the Stack's
	// spec.stack (a Stackwright Stack drives exactly one Pulumi stack).
	// +optional
	StackName string `json:"stackName,omitempty"`
	// Type is the operation: preview, up, refresh or destroy.
	// +optional
	Type UpdateType `json:"type,omitempty"`
	// TtlAfterCompleted deletes the Update this long after it completed.
	// +optional
	TtlAfterCompleted *metav1.Duration `json:"ttlAfterCompleted,omitempty"` //nolint:revive // PKO's field name.
	// Parallel bounds the resource operations run at once (1: one at a time).
	// +optional
	Parallel *int32 `json:"parallel,omitempty"`
	// Message is recorded with the operation in the backend's history.
	// +optional
	Message *string `json:"message,omitempty"`
	// ExpectNoChanges fails the operation if it would change anything.
	// +optional
	ExpectNoChanges *bool `json:"expectNoChanges,omitempty"`
	// Replace lists URNs of resources an up or preview replaces.
	// +optional
	Replace []string `json:"replace,omitempty"`
	// Target limits the operation to these URNs.
	// +optional
	Target []string `json:"target,omitempty"`
	// TargetDependents extends Target to the resources that depend on them.
	// +optional
	TargetDependents *bool `json:"targetDependents,omitempty"`
	// Refresh refreshes the state before an up, preview or destroy.
	// +optional
	Refresh *bool `json:"refresh,omitempty"`
	// ContinueOnError makes an up or destroy go on past a failed resource with the
	// resources that do not depend on it.
	// +optional
	ContinueOnError *bool `json:"continueOnError,omitempty"`
	// Remove deletes the stack from the backend after a destroy.
	// +optional
	Remove *bool `json:"remove,omitempty"`
	// RunProgram runs the program during a refresh or destroy (and the refresh of an up
	// or preview), so that providers it configures take part; unset, the Stack's
	// spec.runProgram decides.
	// +optional
	RunProgram *bool `json:"runProgram,omitempty"`
	// PreviewOnly makes a refresh report the differences it finds without recording
	// them in the state.
	// +optional
	PreviewOnly *bool `json:"previewOnly,omitempty"`
}

// UpdateStatus is PKO's, with the name of the Stackwright Update that ran the operation.
type UpdateStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// StartTime is when the operation started.
	// +optional
	StartTime metav1.Time `json:"startTime,omitempty"`
	// EndTime is when the operation ended.
	// +optional
	EndTime metav1.Time `json:"endTime,omitempty"`
	// Permalink is the operation's page on the backend's console (Pulumi Cloud only).
	// +optional
	Permalink string `json:"permalink,omitempty"`
	// Message says how the operation ended, or why it waits.
	// +optional
	Message string `json:"message,omitempty"`
	// Outputs names the Secret, in the Update's namespace, that holds the stack's outputs
	// after a successful up (Stackwright's Update keeps it; it goes with that Update).
	// +optional
	Outputs string `json:"outputs,omitempty"`
	// Update names the stackwright.dev Update that ran the operation, which holds its
	// planned or applied steps, change counts and log tail.
	// +optional
	Update string `json:"update,omitempty"`
	// Conditions are Progressing, Complete and Failed.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// Update is a one-off operation on a Stack, in PKO v2's shape.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=pulumi
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Workspace",type=string,JSONPath=`.spec.workspaceName`
// +kubebuilder:printcolumn:name="Type",type=string,priority=10,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Start Time",type=date,priority=10,JSONPath=`.status.startTime`
// +kubebuilder:printcolumn:name="End Time",type=date,priority=10,JSONPath=`.status.endTime`
// +kubebuilder:printcolumn:name="Progressing",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].status`
// +kubebuilder:printcolumn:name="Failed",type=string,JSONPath=`.status.conditions[?(@.type=="Failed")].status`
// +kubebuilder:printcolumn:name="Complete",type=string,JSONPath=`.status.conditions[?(@.type=="Complete")].status`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.permalink`
type Update struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   UpdateSpec   `json:"spec,omitempty"`
	Status UpdateStatus `json:"status,omitempty"`
}

// UpdateList is a list of Updates.
//
// +kubebuilder:object:root=true
type UpdateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Update `json:"items"`
}
