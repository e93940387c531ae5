package v1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The types below give spec.workspaceTemplate and spec.updateTemplate PKO v2's schema: the
// apply-configuration shapes of its auto.pulumi.com Workspace and Update, in which every
// field is optional. They are typed, rather than free-form, so that a typo inside a
// template is refused at admission (as PKO refuses it) instead of being kept and ignored.
// Which of these fields Stackwright honours is documented in docs/api.md; the Job executor
// refuses, naming it, any set field it cannot apply.

// TemplateObjectMeta is the metadata of a template: PKO's ObjectMeta apply configuration.
type TemplateObjectMeta struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	GenerateName string `json:"generateName,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	UID types.UID `json:"uid,omitempty"`
	// +optional
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// +optional
	CreationTimestamp *metav1.Time `json:"creationTimestamp,omitempty"`
	// +optional
	DeletionTimestamp *metav1.Time `json:"deletionTimestamp,omitempty"`
	// +optional
	DeletionGracePeriodSeconds *int64 `json:"deletionGracePeriodSeconds,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// +optional
	OwnerReferences []TemplateOwnerReference `json:"ownerReferences,omitempty"`
	// +optional
	Finalizers []string `json:"finalizers,omitempty"`
}

// TemplateOwnerReference is an owner reference in a template's metadata.
type TemplateOwnerReference struct {
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	// +optional
	Kind string `json:"kind,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	UID types.UID `json:"uid,omitempty"`
	// +optional
	Controller *bool `json:"controller,omitempty"`
	// +optional
	BlockOwnerDeletion *bool `json:"blockOwnerDeletion,omitempty"`
}

// TemplateCondition is a condition in a template's status; every field is optional, as in
// PKO's apply configuration.
type TemplateCondition struct {
	// +optional
	Type string `json:"type,omitempty"`
	// +optional
	Status metav1.ConditionStatus `json:"status,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// WorkspaceTemplate is PKO's customisation of its per-stack Workspace. Stackwright has no
// Workspace; the Job executor applies the parts that map onto runner Pods.
type WorkspaceTemplate struct {
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	// +optional
	Kind string `json:"kind,omitempty"`
	// +optional
	Metadata *TemplateObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec *WorkspaceTemplateSpec `json:"spec,omitempty"`
	// Status is part of PKO's shape; it has no meaning in a template and is ignored.
	// +optional
	Status *WorkspaceTemplateStatus `json:"status,omitempty"`
}

// WorkspaceTemplateSpec is PKO's Workspace spec.
type WorkspaceTemplateSpec struct {
	// ServiceAccountName runs the runner Pod as this service account.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// SecurityProfile is PKO's baseline or restricted pod profile. Runner Pods always
	// run restricted.
	// +optional
	SecurityProfile string `json:"securityProfile,omitempty"`
	// Image is the image the runner container runs.
	// +optional
	Image string `json:"image,omitempty"`
	// ImagePullPolicy of the runner container.
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// Git is PKO's workspace-level git source; a Stack's source is its own spec's.
	// +optional
	Git *WorkspaceGitSource `json:"git,omitempty"`
	// Flux is PKO's workspace-level Flux source; a Stack's source is its own spec's.
	// +optional
	Flux *WorkspaceFluxSource `json:"flux,omitempty"`
	// Local names the directory of a program baked into Image (PKO's custom source).
	// +optional
	Local *WorkspaceLocalSource `json:"local,omitempty"`
	// ProjectInfo is PKO's record of the project's name and runtime.
	// +optional
	ProjectInfo *WorkspaceProjectInfo `json:"projectInfo,omitempty"`
	// +optional
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`
	// Env adds environment variables to the runner container.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// Resources of the runner container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// PodTemplate customises the runner Pod.
	// +optional
	PodTemplate *EmbeddedPodTemplateSpec `json:"podTemplate,omitempty"`
	// ServiceTemplate customises PKO's workspace Service, which Stackwright does not have.
	// +optional
	ServiceTemplate *EmbeddedServiceTemplateSpec `json:"serviceTemplate,omitempty"`
	// PulumiLogLevel is PKO's engine log verbosity.
	// +optional
	PulumiLogLevel *int32 `json:"pulumiLogLevel,omitempty"`
	// Stacks is PKO's list of stacks a Workspace prepares.
	// +optional
	Stacks []WorkspaceStack `json:"stacks,omitempty"`
}

// WorkspaceGitSource is PKO's Workspace git source.
type WorkspaceGitSource struct {
	// +optional
	URL string `json:"url,omitempty"`
	// +optional
	Ref string `json:"ref,omitempty"`
	// +optional
	Dir string `json:"dir,omitempty"`
	// +optional
	Auth *WorkspaceGitAuth `json:"auth,omitempty"`
	// +optional
	Shallow bool `json:"shallow,omitempty"`
}

// WorkspaceGitAuth is PKO's Workspace git credentials.
type WorkspaceGitAuth struct {
	// +optional
	SSHPrivateKey *corev1.SecretKeySelector `json:"sshPrivateKey,omitempty"`
	// +optional
	Username *corev1.SecretKeySelector `json:"username,omitempty"`
	// +optional
	Password *corev1.SecretKeySelector `json:"password,omitempty"`
	// +optional
	Token *corev1.SecretKeySelector `json:"token,omitempty"`
	// +optional
	GitHubApp *WorkspaceGitHubAppAuth `json:"githubApp,omitempty"`
}

// WorkspaceGitHubAppAuth is PKO's Workspace GitHub App credentials.
type WorkspaceGitHubAppAuth struct {
	// +optional
	AppID *corev1.SecretKeySelector `json:"appID,omitempty"`
	// +optional
	InstallationID *corev1.SecretKeySelector `json:"installationID,omitempty"`
	// +optional
	PrivateKey *corev1.SecretKeySelector `json:"privateKey,omitempty"`
}

// WorkspaceFluxSource is PKO's Workspace Flux source.
type WorkspaceFluxSource struct {
	// +optional
	URL string `json:"url,omitempty"`
	// +optional
	Digest string `json:"digest,omitempty"`
	// +optional
	Dir string `json:"dir,omitempty"`
}

// WorkspaceLocalSource is PKO's custom source: a directory in the workspace image.
type WorkspaceLocalSource struct {
	// Dir is the absolute path of the Pulumi project in the image.
	// +optional
	Dir string `json:"dir,omitempty"`
}

// WorkspaceProjectInfo is PKO's record of a project.
type WorkspaceProjectInfo struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Runtime string `json:"runtime,omitempty"`
}

// EmbeddedPodTemplateSpec is PKO's pod template: metadata labels and annotations, and a
// full Pod spec.
type EmbeddedPodTemplateSpec struct {
	// +optional
	Metadata *EmbeddedObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec *corev1.PodSpec `json:"spec,omitempty"`
}

// EmbeddedServiceTemplateSpec is PKO's workspace Service template.
type EmbeddedServiceTemplateSpec struct {
	// +optional
	Metadata *EmbeddedObjectMeta `json:"metadata,omitempty"`
}

// EmbeddedObjectMeta is the metadata PKO's embedded templates take.
type EmbeddedObjectMeta struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// WorkspaceStack is PKO's stack entry of a Workspace.
type WorkspaceStack struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Create *bool `json:"create,omitempty"`
	// +optional
	SecretsProvider *string `json:"secretsProvider,omitempty"`
	// +optional
	Config []WorkspaceConfigItem `json:"config,omitempty"`
	// +optional
	Environment []string `json:"environment,omitempty"`
}

// WorkspaceConfigItem is PKO's configuration entry of a Workspace stack.
type WorkspaceConfigItem struct {
	// +optional
	Key string `json:"key,omitempty"`
	// +optional
	Path *bool `json:"path,omitempty"`
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Value *apiextensionsv1.JSON `json:"value,omitempty"`
	// +optional
	ValueFrom *WorkspaceConfigValueFrom `json:"valueFrom,omitempty"`
	// +optional
	Secret *bool `json:"secret,omitempty"`
}

// WorkspaceConfigValueFrom is where PKO reads a configuration value from.
type WorkspaceConfigValueFrom struct {
	// +optional
	Env string `json:"env,omitempty"`
	// +optional
	Path string `json:"path,omitempty"`
	// +optional
	JSON *bool `json:"json,omitempty"`
}

// WorkspaceTemplateStatus is PKO's Workspace status.
type WorkspaceTemplateStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Address string `json:"address,omitempty"`
	// +optional
	PulumiVersion string `json:"pulumiVersion,omitempty"`
	// +optional
	Conditions []TemplateCondition `json:"conditions,omitempty"`
}

// UpdateTemplate is PKO's customisation of the Update objects it creates for a Stack.
// Stackwright's Updates are its own kind; the fields it honours are documented in
// docs/api.md.
type UpdateTemplate struct {
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	// +optional
	Kind string `json:"kind,omitempty"`
	// +optional
	Metadata *TemplateObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec *UpdateTemplateSpec `json:"spec,omitempty"`
	// Status is part of PKO's shape; it has no meaning in a template and is ignored.
	// +optional
	Status *UpdateTemplateStatus `json:"status,omitempty"`
}

// UpdateTemplateSpec is PKO's Update spec.
type UpdateTemplateSpec struct {
	// +optional
	WorkspaceName string `json:"workspaceName,omitempty"`
	// +optional
	StackName string `json:"stackName,omitempty"`
	// +optional
	Type string `json:"type,omitempty"`
	// +optional
	TTLAfterCompleted string `json:"ttlAfterCompleted,omitempty"`
	// +optional
	Parallel *int32 `json:"parallel,omitempty"`
	// +optional
	Message *string `json:"message,omitempty"`
	// +optional
	ExpectNoChanges *bool `json:"expectNoChanges,omitempty"`
	// +optional
	Replace []string `json:"replace,omitempty"`
	// +optional
	Target []string `json:"target,omitempty"`
	// +optional
	TargetDependents *bool `json:"targetDependents,omitempty"`
	// +optional
	Refresh *bool `json:"refresh,omitempty"`
	// +optional
	ContinueOnError *bool `json:"continueOnError,omitempty"`
	// +optional
	Remove *bool `json:"remove,omitempty"`
	// +optional
	RunProgram *bool `json:"runProgram,omitempty"`
}

// UpdateTemplateStatus is PKO's Update status.
type UpdateTemplateStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// +optional
	Permalink string `json:"permalink,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	Outputs string `json:"outputs,omitempty"`
	// +optional
	ProjectInfo *WorkspaceProjectInfo `json:"projectInfo,omitempty"`
	// +optional
	Conditions []TemplateCondition `json:"conditions,omitempty"`
}
