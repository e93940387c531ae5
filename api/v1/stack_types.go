package v1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StackSpec is the desired state of a Pulumi stack.
//
// The JSON field names and shapes match PKO's pulumi.com/v1 Stack so that PKO
// manifests apply unchanged. Fields PKO marks deprecated are still accepted and
// are mapped onto their replacements by the controller. Everything Stackwright
// adds on top of PKO lives in spec.stackwright.
//
// One source is given: a git repository (projectRepo and its companions), a
// Flux source object (fluxSource), a Program object (programRef) or, with none
// of them, a program baked into spec.workspaceTemplate's image. Admission is no
// stricter than PKO's; what it lets through but cannot run is reported by
// Review and stalls the Stack.
type StackSpec struct {
	// ---- Identity and backend ----

	// Stack is the fully qualified name of the Pulumi stack to deploy, for
	// example "org/project/dev" (Pulumi Cloud) or "dev" (self-managed backend).
	Stack string `json:"stack"`

	// Backend is the URL of the state backend used for all operations, e.g.
	// "https://api.pulumi.com", "s3://bucket", "gs://bucket", "azblob://container"
	// or "file:///path". Empty means the Pulumi default (Pulumi Cloud).
	// +optional
	Backend string `json:"backend,omitempty"`

	// AccessTokenSecret names a Secret in the Stack's namespace whose
	// "accessToken" key holds PULUMI_ACCESS_TOKEN.
	// Deprecated: use envRefs with a PULUMI_ACCESS_TOKEN entry of type Secret.
	// +optional
	AccessTokenSecret string `json:"accessTokenSecret,omitempty"`

	// SecretsProvider selects an alternative encryption provider used when the
	// stack is created, e.g. "awskms://...", "gcpkms://...",
	// "azurekeyvault://..." or "passphrase".
	// +optional
	SecretsProvider string `json:"secretsProvider,omitempty"`

	// ---- Environment ----

	// Envs lists ConfigMaps whose entries are exported as environment variables
	// to the engine.
	// Deprecated: use envRefs.
	// +optional
	Envs []string `json:"envs,omitempty"`

	// EnvSecrets lists Secrets whose entries are exported as environment
	// variables to the engine.
	// Deprecated: use envRefs.
	// +optional
	EnvSecrets []string `json:"envSecrets,omitempty"`

	// EnvRefs maps environment variable names to where their values come from.
	// +optional
	EnvRefs map[string]ResourceRef `json:"envRefs,omitempty"`

	// Environment lists Pulumi ESC environments to import into the stack.
	// +optional
	// +listType=atomic
	Environment []string `json:"environment,omitempty"`

	// ---- Configuration ----

	// Config sets stack configuration values inline. Values may be any JSON
	// value: strings, numbers, booleans, lists or objects. Keys use the Pulumi
	// "namespace:key" form; a key absent here keeps whatever the project's
	// stack settings file says.
	// +optional
	Config map[string]apiextensionsv1.JSON `json:"config,omitempty"`

	// ConfigRef sets stack configuration values from ConfigMap keys, keyed by
	// the Pulumi config key.
	// +optional
	ConfigRef map[string]ConfigMapRef `json:"configRef,omitempty"`

	// Secrets sets secret configuration values inline, in clear text.
	// Deprecated: use secretsRef.
	// +optional
	Secrets map[string]string `json:"secrets,omitempty"`

	// SecretsRef sets secret configuration values from references, keyed by
	// the Pulumi config key. The values are stored encrypted in the stack.
	// +optional
	SecretsRef map[string]ResourceRef `json:"secretsRef,omitempty"`

	// ---- Source: git (inlined at the top level of spec, as in PKO) ----

	GitSource `json:",inline"`

	// ---- Source: Flux ----

	// FluxSource takes the program from the artifact of a Flux source object
	// (GitRepository, OCIRepository, Bucket) in the Stack's namespace.
	// +optional
	FluxSource *FluxSource `json:"fluxSource,omitempty"`

	// ---- Source: Program object ----

	// ProgramRef takes the program from a Program object in the Stack's
	// namespace.
	// +optional
	ProgramRef *ProgramReference `json:"programRef,omitempty"`

	// ---- Operation ----

	// Targets limits updates to the resources with these URNs.
	// +optional
	Targets []string `json:"targets,omitempty"`

	// TargetDependents also updates resources that depend on the targets.
	// Only meaningful together with targets.
	// +optional
	TargetDependents bool `json:"targetDependents,omitempty"`

	// Prerequisites are other Stacks in the same namespace that must have
	// succeeded (optionally recently) before this Stack is updated.
	// +optional
	Prerequisites []PrerequisiteRef `json:"prerequisites,omitempty"`

	// ContinueResyncOnCommitMatch keeps running the program at every resync
	// even when the source revision has already been applied successfully.
	// By default a revision that succeeded is not run again.
	// +optional
	ContinueResyncOnCommitMatch bool `json:"continueResyncOnCommitMatch,omitempty"`

	// Refresh runs a refresh before each update.
	// +optional
	Refresh bool `json:"refresh,omitempty"`

	// ExpectNoRefreshChanges fails the update when the refresh that precedes
	// it finds changes.
	// +optional
	ExpectNoRefreshChanges bool `json:"expectNoRefreshChanges,omitempty"`

	// RunProgram runs the program during refresh and destroy operations
	// (the engine's --run-program), so that providers configured by the
	// program are used.
	// +optional
	RunProgram bool `json:"runProgram,omitempty"`

	// DestroyOnFinalize destroys the stack's resources (and removes the
	// stack) when the Stack object is deleted.
	// +optional
	DestroyOnFinalize bool `json:"destroyOnFinalize,omitempty"`

	// RetryOnUpdateConflict makes a Stack whose stack is locked by another
	// update (HTTP 409, or a lock file) try again every 10s instead of backing
	// off up to 5 minutes. A conflict never stalls a Stack either way (unlike
	// PKO, which stalls without this field).
	// +optional
	RetryOnUpdateConflict bool `json:"retryOnUpdateConflict,omitempty"`

	// InitOnCreate is accepted so that manifests written for early PKO versions
	// (such as the C# example in PKO's documentation) still apply with strict
	// field validation. It has no effect: Stackwright always creates a stack
	// that does not exist, unless useLocalStackOnly is set.
	// Deprecated: remove it from manifests.
	// +optional
	InitOnCreate bool `json:"initOnCreate,omitempty"`

	// UseLocalStackOnly refuses to create the stack when it does not already
	// exist in the backend (or in the source's stack settings files).
	// +optional
	UseLocalStackOnly bool `json:"useLocalStackOnly,omitempty"`

	// ResyncFrequencySeconds is how often the source is polled (branch
	// tracking) and, with continueResyncOnCommitMatch, the program re-run.
	// 0 (or a negative value) means the default, 60s. Values below 10 are
	// treated as 10 (PKO's floor is 60).
	// +optional
	ResyncFrequencySeconds int64 `json:"resyncFrequencySeconds,omitempty"`

	// RetryMaxBackoffDurationSeconds caps the exponential backoff between
	// retries of a failed update. 0 means the default (86400, one day).
	// +optional
	RetryMaxBackoffDurationSeconds int64 `json:"retryMaxBackoffDurationSeconds,omitempty"`

	// Preview only runs previews, never updates.
	// +optional
	Preview bool `json:"preview,omitempty"`

	// DriftDetection schedules refresh-based drift checks.
	// +optional
	DriftDetection *DriftDetectionSpec `json:"driftDetection,omitempty"`

	// ---- Execution ----

	// ServiceAccountName is the ServiceAccount (in the Stack's namespace) that
	// engine runs for this Stack execute as.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// WorkspaceTemplate is PKO's customisation of its per-stack Workspace
	// (metadata, image, resources, volumes, pod template, ...), with PKO's
	// schema. Stackwright has no Workspace object: the Job executor applies the
	// parts that map onto runner Pods and refuses, naming them, the others.
	// +optional
	WorkspaceTemplate *WorkspaceTemplate `json:"workspaceTemplate,omitempty"`

	// WorkspaceReclaimPolicy is PKO's choice of keeping (Retain) or deleting
	// (Delete) the stack's workspace after a successful update. Empty means
	// Retain.
	// +optional
	WorkspaceReclaimPolicy WorkspaceReclaimPolicy `json:"workspaceReclaimPolicy,omitempty"`

	// UpdateTemplate is PKO's customisation of the Update objects generated
	// for this Stack (metadata, TTL, parallelism, ...), with PKO's schema.
	// Accepted and kept; not applied (docs/api.md).
	// +optional
	UpdateTemplate *UpdateTemplate `json:"updateTemplate,omitempty"`

	// ---- Stackwright additions ----

	// Stackwright holds the settings Stackwright adds to the PKO API. They are
	// grouped in one sub-object, rather than spread over the top level, so the
	// PKO surface stays recognisable and a field PKO may add later under the
	// same name cannot collide with ours.
	// +optional
	Stackwright *StackwrightSpec `json:"stackwright,omitempty"`
}

// PrerequisiteRef names another Stack that must have succeeded before this one
// is updated.
type PrerequisiteRef struct {
	// Name of the prerequisite Stack, in the same namespace.
	Name string `json:"name"`

	// Requirement tightens what counts as satisfied. Without it the
	// prerequisite only has to be in a succeeded state.
	// +optional
	Requirement *RequirementSpec `json:"requirement,omitempty"`
}

// RequirementSpec lists conditions a prerequisite must meet.
type RequirementSpec struct {
	// SucceededWithinDuration requires the prerequisite's last success to be
	// no older than this duration (e.g. "1h"): a non-negative Go duration. A
	// value that does not parse stalls the Stack (reason SpecInvalid).
	// +optional
	SucceededWithinDuration string `json:"succeededWithinDuration,omitempty"`
}

// DriftDetectionSpec schedules drift checks: refresh previews that report
// resources whose real state has diverged from the stack's state.
type DriftDetectionSpec struct {
	// Schedules are cron schedules on which drift checks run.
	// +optional
	Schedules []DriftSchedule `json:"schedules,omitempty"`
}

// DriftSchedule is one drift detection schedule.
type DriftSchedule struct {
	// Cron is a standard five-field cron expression, e.g. "*/15 * * * *".
	// +kubebuilder:validation:MinLength=1
	Cron string `json:"cron"`

	// AutoRemediate runs an update when drift is found.
	// +optional
	AutoRemediate bool `json:"autoRemediate,omitempty"`
}

// WorkspaceReclaimPolicy is PKO's workspace retention choice.
// +kubebuilder:validation:Enum=Retain;Delete
type WorkspaceReclaimPolicy string

const (
	// WorkspaceReclaimRetain keeps the workspace after a successful update.
	WorkspaceReclaimRetain WorkspaceReclaimPolicy = "Retain"
	// WorkspaceReclaimDelete deletes the workspace after a successful update.
	WorkspaceReclaimDelete WorkspaceReclaimPolicy = "Delete"
)

// Stack is a Pulumi stack reconciled by Stackwright. The printer columns are PKO's, in
// PKO's order, then Stackwright's (-o wide).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={pulumi,stackwright},shortName=stk
// +kubebuilder:storageversion
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
// +kubebuilder:printcolumn:name="Expires",type=string,priority=10,JSONPath=`.status.stackwright.expiresAt`
// +kubebuilder:printcolumn:name="Rollout",type=string,priority=10,JSONPath=`.status.stackwright.rollout.name`
// +kubebuilder:printcolumn:name="Held At",type=string,priority=10,JSONPath=`.status.stackwright.rollout.heldAt`
type Stack struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StackSpec   `json:"spec,omitempty"`
	Status StackStatus `json:"status,omitempty"`
}

// StackList is a list of Stacks.
//
// +kubebuilder:object:root=true
type StackList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Stack `json:"items"`
}
