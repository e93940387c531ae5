package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and annotations that tie a StackTemplate to what Stackwright makes for it.
const (
	// TemplateLabel names the StackTemplate on its CustomResourceDefinition and on each
	// instance's Stack and parameter Secret. Stackwright never touches a
	// CustomResourceDefinition or Stack without it.
	TemplateLabel = "stackwright.dev/template"
	// InstanceNamespaceLabel is the instance's namespace, on its Stack: the tenant whose
	// runner slots the Stack's Updates use.
	InstanceNamespaceLabel = "stackwright.dev/instance-namespace"
	// InstanceUIDLabel is the instance's UID, on its Stack: a Stack is an instance's only
	// while the UIDs match, so an instance deleted and created again never inherits the
	// old one's Stack half-destroyed.
	InstanceUIDLabel = "stackwright.dev/instance-uid"
	// InstanceAnnotation is the instance's <namespace>/<name>, on its Stack.
	InstanceAnnotation = "stackwright.dev/instance"
	// TemplateRevisionLabel is the template revision an instance's Stack was rendered
	// from, on the Stack: kubectl get stacks -l stackwright.dev/template-revision=3. While
	// the Stack only previews a revision for a rollout (RolloutPreviewAnnotation Preview),
	// it names that revision, and TemplateRevisionHeldAnnotation the one the Stack has.
	TemplateRevisionLabel = "stackwright.dev/template-revision"
	// RolloutPreviewAnnotation is set by the instance controller on an instance's Stack of
	// spec.stack that a StackRollout of template revisions with spec.gates.preview renders
	// from its target, and tells the Stack controller what the preview gate asks of the
	// Stack's change: RolloutPreviewOnly while the Stack's wave previews the target (preview
	// the change, saving its plan, and apply nothing), RolloutPreviewApply once its wave is
	// open (preview the change and hold the up to that plan). It travels with the spec it
	// speaks of, in one write, so that no Stack controller (another shard's, or one whose
	// cache lags) applies a spec rendered only to be previewed.
	RolloutPreviewAnnotation = "stackwright.dev/rollout-preview"
	// TemplateRevisionHeldAnnotation, beside RolloutPreviewAnnotation's RolloutPreviewOnly,
	// is the template revision the Stack has (it deployed, or is held at), which it is
	// rendered from again once its wave no longer previews.
	TemplateRevisionHeldAnnotation = "stackwright.dev/template-revision-held"
	// TemplateStackLabel names, on a Stack of an instance of a composed template, the
	// entry of the template's spec.stacks it was rendered from; the Stack of spec.stack has
	// none.
	TemplateStackLabel = "stackwright.dev/template-stack"
	// InstanceFinalizer holds an instance until its Stack is gone.
	InstanceFinalizer = "stackwright.dev/instance"
	// TemplateFinalizer holds a StackTemplate until its last instance is gone, and then
	// removes its CustomResourceDefinition.
	TemplateFinalizer = "stackwright.dev/template"
)

// The values of RolloutPreviewAnnotation.
const (
	// RolloutPreviewOnly: the Stack previews its change for a rollout's preview gate and
	// applies nothing; its up waits for its wave to open.
	RolloutPreviewOnly = "Preview"
	// RolloutPreviewApply: the Stack's wave is open; its change is previewed first and the
	// up held to that preview's plan, the one the preview gate judged.
	RolloutPreviewApply = "Apply"
)

// InstanceSpec is the spec of every kind a StackTemplate defines: the parameters (their
// schema is the template's) and where the outputs go.
type InstanceSpec struct {
	// Parameters, as the template's schema allows.
	// +optional
	Parameters *apiextensionsv1.JSON `json:"parameters,omitempty"`

	// WriteConnectionSecretToRef names a Secret in the instance's namespace that receives
	// every output the template publishes, secret or not. Stackwright creates and owns it.
	// +optional
	WriteConnectionSecretToRef *LocalObjectReference `json:"writeConnectionSecretToRef,omitempty"`

	// WriteOutputsToConfigMapRef names a ConfigMap in the instance's namespace that
	// receives the non-secret outputs the template publishes. Stackwright creates and owns
	// it.
	// +optional
	WriteOutputsToConfigMapRef *LocalObjectReference `json:"writeOutputsToConfigMapRef,omitempty"`
}

// LocalObjectReference names an object in the referrer's namespace.
type LocalObjectReference struct {
	// Name of the object.
	Name string `json:"name"`
}

// InstanceStatus is the status of every kind a StackTemplate defines.
type InstanceStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling and Stalled (kstatus), mirrored from the instance's
	// Stack, and Stalled for what stops the instance before it has one.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// TemplateRevision is the template revision the instance's Stack was rendered from.
	// +optional
	TemplateRevision int64 `json:"templateRevision,omitempty"`

	// LastUpdate is the last operation of the instance's stack.
	// +optional
	LastUpdate *InstanceUpdate `json:"lastUpdate,omitempty"`

	// Outputs are the non-secret outputs the template publishes.
	// +optional
	Outputs map[string]apiextensionsv1.JSON `json:"outputs,omitempty"`

	// Fields are the typed status fields the template declares (spec.statusFields), each
	// filled from the non-secret output it names, converted to its type; a field whose
	// output is unpublished, secret or of another type is unset.
	// +optional
	Fields map[string]apiextensionsv1.JSON `json:"fields,omitempty"`

	// Approval is the change of the instance's stack that waits for, or had, an approval,
	// when the template's stack requires one.
	// +optional
	Approval *InstanceApproval `json:"approval,omitempty"`
}

// InstanceApproval is the approval state of an instance's change, as its Stack records it.
type InstanceApproval struct {
	// State is Previewing, AwaitingApproval, Approved, Rejected, Blocked or Failed.
	State string `json:"state,omitempty"`
	// Preview names the preview of the change: the value that approves it.
	Preview string `json:"preview,omitempty"`
	// Summary is the preview's change summary, e.g. "1 to create".
	Summary string `json:"summary,omitempty"`
}

// InstanceUpdate is the last operation of an instance's stack, as its Stack records it.
type InstanceUpdate struct {
	// Type is up, preview, refresh or destroy.
	Type string `json:"type,omitempty"`
	// State is succeeded or failed.
	State string `json:"state,omitempty"`
	// Message is the operation's summary.
	Message string `json:"message,omitempty"`
	// Time is when it ended.
	Time *metav1.Time `json:"time,omitempty"`
}
