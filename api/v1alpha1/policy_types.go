package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyEnforcement says what a policy's violation does to a change.
// +kubebuilder:validation:Enum=mandatory;advisory
type PolicyEnforcement string

const (
	// EnforcementMandatory stops the change before anything is applied.
	EnforcementMandatory PolicyEnforcement = "mandatory"
	// EnforcementAdvisory records the violation and lets the change through.
	EnforcementAdvisory PolicyEnforcement = "advisory"
)

// PolicyRule is the rule a policy's Rego module must define: a set of messages, one per
// violation, e.g. `deny contains msg if { ... }`.
const PolicyRule = "deny"

// PolicySpec is a guardrail evaluated against the preview of every change of the Stacks
// it selects, before anything is applied.
type PolicySpec struct {
	// Enforcement is mandatory (a violation stops the change: nothing is applied, the
	// Stack is Stalled with reason PolicyViolation) or advisory (the violation is recorded
	// in the preview Update, the Stack's status and a Warning event, and the change goes
	// on).
	// +optional
	// +kubebuilder:default=mandatory
	Enforcement PolicyEnforcement `json:"enforcement,omitempty"`

	// StackSelector selects the Stacks the policy applies to by their labels; empty (or
	// unset) selects every Stack in its scope.
	// +optional
	StackSelector *metav1.LabelSelector `json:"stackSelector,omitempty"`

	// Rego is the policy: a Rego v1 module that defines the rule deny, a set of
	// messages. Its input is {"stack": {name, namespace, labels, annotations, revision},
	// "steps": [{op, urn, type, changed, replacing, protected, inputs, oldInputs}],
	// "changes": {op: count}}; secret values appear as "[secret]". Network and runtime
	// builtins (http.send, net.lookup_ip_addr, opa.runtime) are not available.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	Rego string `json:"rego"`
}

// PolicyStatus says whether the policy's module compiles.
type PolicyStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready=True (reason Compiled) or Ready=False (reason CompileError,
	// with the compiler's message).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Policy is a guardrail for the Stacks of its namespace: a Rego module judged against the
// planned operations of each of their changes.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=stackwright
// +kubebuilder:printcolumn:name="Enforcement",type=string,JSONPath=`.spec.enforcement`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Policy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PolicySpec   `json:"spec"`
	Status PolicyStatus `json:"status,omitempty"`
}

// PolicyList is a list of Policies.
//
// +kubebuilder:object:root=true
type PolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Policy `json:"items"`
}

// ClusterPolicy is a Policy for the Stacks of every namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=stackwright
// +kubebuilder:printcolumn:name="Enforcement",type=string,JSONPath=`.spec.enforcement`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PolicySpec   `json:"spec"`
	Status PolicyStatus `json:"status,omitempty"`
}

// ClusterPolicyList is a list of ClusterPolicies.
//
// +kubebuilder:object:root=true
type ClusterPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPolicy `json:"items"`
}

// GetConditions lets generic code reach a Policy's conditions.
func (p *Policy) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions replaces the Policy's conditions.
func (p *Policy) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }

// GetConditions lets generic code reach a ClusterPolicy's conditions.
func (p *ClusterPolicy) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions replaces the ClusterPolicy's conditions.
func (p *ClusterPolicy) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }
