package v1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProgramSpec is an inline Pulumi YAML program. Its sections mirror the
// top-level sections of a Pulumi YAML Pulumi.yaml; expressions such as
// "${res.prop}" and "fn::invoke" are kept verbatim and evaluated by the YAML
// language host, not by Stackwright.
type ProgramSpec struct {
	// Configuration declares the config inputs of the program.
	// +optional
	Configuration map[string]Configuration `json:"configuration,omitempty"`

	// Resources declares the resources of the program, keyed by logical name.
	// +optional
	Resources map[string]Resource `json:"resources,omitempty"`

	// Variables are named intermediate values (any expression, including
	// function invocations) that resources and outputs can refer to.
	// +optional
	Variables map[string]apiextensionsv1.JSON `json:"variables,omitempty"`

	// Outputs are the stack outputs, keyed by name; values are expressions.
	// +optional
	Outputs map[string]apiextensionsv1.JSON `json:"outputs,omitempty"`

	// Packages declares packages to install before running the program
	// (parameterized providers, git-hosted components), keyed by name; each
	// value is a package specification as the pulumi CLI accepts it.
	// +optional
	Packages map[string]string `json:"packages,omitempty"`
}

// ConfigType is the declared type of a configuration input. PKO accepts the
// first four values; the rest are the other types the YAML language host
// understands.
// +kubebuilder:validation:Enum={"String","Number","List<Number>","List<String>","Boolean","List<Boolean>","Int","List<Int>"}
type ConfigType string

// Configuration declares one config input of a program. It needs a type, a
// default, or both. (Not enforced at admission: CEL cannot see the untyped
// default field.)
type Configuration struct {
	// Type of the value.
	// +optional
	Type ConfigType `json:"type,omitempty"`

	// Default is used when the stack sets no value.
	// +optional
	Default *apiextensionsv1.JSON `json:"default,omitempty"`
}

// Resource declares one resource of a program. Get and properties are
// mutually exclusive. (Not enforced at admission: CEL cannot see maps of
// untyped values.)
type Resource struct {
	// Type is the Pulumi type token, e.g. "aws:s3:Bucket".
	// +kubebuilder:validation:MinLength=1
	Type string `json:"type"`

	// Properties are the resource's inputs; values may be expressions.
	// +optional
	Properties map[string]apiextensionsv1.JSON `json:"properties,omitempty"`

	// Options are the resource options.
	// +optional
	Options *ResourceOptions `json:"options,omitempty"`

	// Get reads an existing resource instead of managing it.
	// +optional
	Get *Getter `json:"get,omitempty"`
}

// ResourceOptions are the Pulumi resource options of a resource. Fields that
// take a resource (dependsOn, parent, provider, providers, deletedWith) hold
// expressions such as "${other}".
type ResourceOptions struct {
	// AdditionalSecretOutputs lists output properties to mark secret.
	// +optional
	AdditionalSecretOutputs []string `json:"additionalSecretOutputs,omitempty"`

	// Aliases are former identities of the resource, so renames do not
	// replace it. Entries are strings (URNs) or alias objects.
	// +optional
	Aliases []apiextensionsv1.JSON `json:"aliases,omitempty"`

	// CustomTimeouts overrides the provider's create/update/delete timeouts.
	// +optional
	CustomTimeouts *CustomTimeouts `json:"customTimeouts,omitempty"`

	// DeleteBeforeReplace deletes the old resource before creating its
	// replacement.
	// +optional
	DeleteBeforeReplace bool `json:"deleteBeforeReplace,omitempty"`

	// DeletedWith skips deleting this resource when the given resource is
	// deleted too.
	// +optional
	DeletedWith *apiextensionsv1.JSON `json:"deletedWith,omitempty"`

	// DependsOn adds explicit dependencies.
	// +optional
	DependsOn []apiextensionsv1.JSON `json:"dependsOn,omitempty"`

	// IgnoreChanges lists properties whose changes are ignored when diffing.
	// +optional
	IgnoreChanges []string `json:"ignoreChanges,omitempty"`

	// Import adopts the existing cloud resource with this ID.
	// +optional
	Import string `json:"import,omitempty"`

	// Parent is the parent resource.
	// +optional
	Parent *apiextensionsv1.JSON `json:"parent,omitempty"`

	// PluginDownloadURL is where the provider plugin is downloaded from.
	// +optional
	PluginDownloadURL string `json:"pluginDownloadURL,omitempty"`

	// Protect refuses to delete the resource.
	// +optional
	Protect bool `json:"protect,omitempty"`

	// Provider is the explicit provider resource for this resource.
	// +optional
	Provider *apiextensionsv1.JSON `json:"provider,omitempty"`

	// Providers maps packages to explicit provider resources for this
	// resource and its children.
	// +optional
	Providers map[string]apiextensionsv1.JSON `json:"providers,omitempty"`

	// ReplaceOnChanges lists properties whose changes force a replacement.
	// +optional
	ReplaceOnChanges []string `json:"replaceOnChanges,omitempty"`

	// RetainOnDelete leaves the cloud resource in place when it is deleted
	// from the stack.
	// +optional
	RetainOnDelete bool `json:"retainOnDelete,omitempty"`

	// Version pins the provider plugin version.
	// +optional
	Version string `json:"version,omitempty"`
}

// CustomTimeouts are per-operation timeouts, as Go duration strings ("5m").
type CustomTimeouts struct {
	// Create timeout.
	// +optional
	Create string `json:"create,omitempty"`

	// Update timeout.
	// +optional
	Update string `json:"update,omitempty"`

	// Delete timeout.
	// +optional
	Delete string `json:"delete,omitempty"`
}

// Getter reads an existing resource by ID.
type Getter struct {
	// ID of the resource to read.
	// +kubebuilder:validation:MinLength=1
	ID string `json:"id"`

	// State holds known properties that help the provider find the resource.
	// +optional
	State map[string]apiextensionsv1.JSON `json:"state,omitempty"`
}

// ProgramStatus is the observed state of a Program.
type ProgramStatus struct {
	// ObservedGeneration is the metadata.generation last rendered.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready is True once the program has been rendered into an
	// artifact.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// Artifact is the last artifact rendered from this Program.
	// +optional
	Artifact *ProgramArtifact `json:"artifact,omitempty"`
}

// ProgramArtifact describes the rendered, content-addressed form of a Program
// in the artifact store.
type ProgramArtifact struct {
	// Digest is the artifact's content digest, "sha256:<hex>".
	// +optional
	Digest string `json:"digest,omitempty"`

	// Revision identifies the Program state it was rendered from.
	// +optional
	Revision string `json:"revision,omitempty"`

	// Path is the artifact's path in the manager's artifact store, relative to its root
	// (Flux's and PKO's artifact field).
	// +optional
	Path string `json:"path,omitempty"`

	// URL is PKO's download URL of the artifact. Stackwright leaves it empty: runners
	// fetch artifacts by digest from the manager's runner API, with a runner's token.
	// +optional
	URL string `json:"url,omitempty"`

	// Size of the artifact in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`

	// LastUpdateTime is when the artifact was last (re)rendered.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`

	// Metadata is Flux's and PKO's free-form artifact metadata; Stackwright sets none.
	// +optional
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Program is an inline Pulumi YAML program that Stacks use through
// spec.programRef. As in PKO, the program lives in a top-level "program"
// field, not in "spec".
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={pulumi,stackwright},shortName=prog
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Digest",type=string,priority=10,JSONPath=`.status.artifact.digest`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Program struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Program ProgramSpec   `json:"program,omitempty"`
	Status  ProgramStatus `json:"status,omitempty"`
}

// ProgramList is a list of Programs.
//
// +kubebuilder:object:root=true
type ProgramList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Program `json:"items"`
}
