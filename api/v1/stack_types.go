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
// Exactly one source must be given: a git repository (projectRepo and its
// companions), a Flux source object (fluxSource) or a Program object
// (programRef).
//
// +kubebuilder:validation:XValidation:rule="(has(self.projectRepo) && size(self.projectRepo) > 0 ? 1 : 0) + (has(self.fluxSource) ? 1 : 0) + (has(self.programRef) ? 1 : 0) <= 1",message="at most one of spec.projectRepo, spec.fluxSource or spec.programRef may be set (with none, the program is baked into spec.workspaceTemplate's image at spec.local.dir)"
// +kubebuilder:validation:XValidation:rule="!(has(self.commit) && size(self.commit) > 0 && has(self.branch) && size(self.branch) > 0)",message="spec.commit and spec.branch are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="!has(self.projectRepo) || size(self.projectRepo) == 0 || (has(self.commit) && size(self.commit) > 0) || (has(self.branch) && size(self.branch) > 0)",message="spec.projectRepo requires one of spec.commit or spec.branch"
// +kubebuilder:validation:XValidation:rule="(has(self.projectRepo) && size(self.projectRepo) > 0) || ((!has(self.commit) || size(self.commit) == 0) && (!has(self.branch) || size(self.branch) == 0))",message="spec.commit and spec.branch are only valid with spec.projectRepo"
// +kubebuilder:validation:XValidation:rule="(has(self.projectRepo) && size(self.projectRepo) > 0) || !has(self.repoDir) || size(self.repoDir) == 0",message="spec.repoDir is only valid with spec.projectRepo (use spec.fluxSource.dir with a Flux source)"
// +kubebuilder:validation:XValidation:rule="(has(self.projectRepo) && size(self.projectRepo) > 0) || !has(self.shallow) || !self.shallow",message="spec.shallow is only valid with spec.projectRepo"
// +kubebuilder:validation:XValidation:rule="(has(self.projectRepo) && size(self.projectRepo) > 0) || (!has(self.gitAuth) && (!has(self.gitAuthSecret) || size(self.gitAuthSecret) == 0))",message="spec.gitAuth and spec.gitAuthSecret are only valid with spec.projectRepo"
type StackSpec struct {
	// ---- Identity and backend ----

	// Stack is the fully qualified name of the Pulumi stack to deploy, for
	// example "org/project/dev" (Pulumi Cloud) or "dev" (self-managed backend).
	// +kubebuilder:validation:MinLength=1
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

	// RetryOnUpdateConflict retries when the backend reports that another
	// update of the stack is in progress (HTTP 409) instead of stalling.
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
	// 0 means the default (60s). Like PKO, non-zero values below 60 are
	// treated as 60.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ResyncFrequencySeconds int64 `json:"resyncFrequencySeconds,omitempty"`

	// RetryMaxBackoffDurationSeconds caps the exponential backoff between
	// retries of a failed update. 0 means the default (86400, one day).
	// +optional
	// +kubebuilder:validation:Minimum=0
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
	// (metadata, image, resources, volumes, pod template, ...). Stackwright
	// has no Workspace object; it accepts and preserves any content here
	// unchanged and honours the parts that map onto its runners.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	WorkspaceTemplate *apiextensionsv1.JSON `json:"workspaceTemplate,omitempty"`

	// WorkspaceReclaimPolicy is PKO's choice of keeping (Retain) or deleting
	// (Delete) the stack's workspace after a successful update. Empty means
	// Retain.
	// +optional
	WorkspaceReclaimPolicy WorkspaceReclaimPolicy `json:"workspaceReclaimPolicy,omitempty"`

	// UpdateTemplate is PKO's customisation of the Update objects generated
	// for this Stack (metadata, TTL, parallelism, ...). Any content is
	// accepted and preserved unchanged.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	UpdateTemplate *apiextensionsv1.JSON `json:"updateTemplate,omitempty"`

	// ---- Stackwright additions ----

	// Stackwright holds the settings Stackwright adds to the PKO API. They are
	// grouped in one sub-object, rather than spread over the top level, so the
	// PKO surface stays recognisable and a field PKO may add later under the
	// same name cannot collide with ours.
	// +optional
	Stackwright *StackwrightSpec `json:"stackwright,omitempty"`
}

// StackwrightSpec holds the Stack settings that PKO does not have.
type StackwrightSpec struct {
	// Suspend stops all engine runs for this Stack (updates, previews,
	// refreshes and resyncs) until it is set back to false. An update already
	// running is allowed to finish. Deleting a suspended Stack still honours
	// destroyOnFinalize.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// IdentityTokens are projected ServiceAccount tokens, each with its own
	// audience and lifetime, mounted into the runner Pod for cloud workload
	// identity federation. They need the Job executor: with the local
	// executor the Stack is stalled (InvalidSpec) instead of running without
	// them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.audience == a.audience))",message="each audience may appear only once"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !has(a.announce) || a.announce == 'None' || self.exists_one(b, has(b.announce) && b.announce == a.announce))",message="at most one token may announce each cloud (AWS, Azure, Google)"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !has(a.env) || self.exists_one(b, has(b.env) && b.env == a.env))",message="each env name may appear only once"
	IdentityTokens []IdentityToken `json:"identityTokens,omitempty"`
}

// IdentityTokenAnnounce names the cloud whose SDKs are told where a token is.
// +kubebuilder:validation:Enum=AWS;Azure;Google;None
type IdentityTokenAnnounce string

const (
	// AnnounceAWS sets AWS_WEB_IDENTITY_TOKEN_FILE to the token's path.
	AnnounceAWS IdentityTokenAnnounce = "AWS"
	// AnnounceAzure sets AZURE_FEDERATED_TOKEN_FILE to the token's path.
	AnnounceAzure IdentityTokenAnnounce = "Azure"
	// AnnounceGoogle sets GOOGLE_APPLICATION_CREDENTIALS to an external_account
	// credential configuration that reads the token.
	AnnounceGoogle IdentityTokenAnnounce = "Google"
	// AnnounceNone sets no cloud's variable.
	AnnounceNone IdentityTokenAnnounce = "None"
)

// DefaultIdentityTokenExpirationSeconds is an IdentityToken's lifetime when
// it sets none.
const DefaultIdentityTokenExpirationSeconds = 3600

// IdentityToken is one projected ServiceAccount token of the Stack's runner
// Pod, issued by the API server for the Pod's ServiceAccount and rotated by
// the kubelet.
// +kubebuilder:validation:XValidation:rule="self.audience != 'stackwright.dev/runner'",message="audience stackwright.dev/runner is reserved for the runner's own token"
// +kubebuilder:validation:XValidation:rule="!has(self.announce) || self.announce != 'Google' || self.audience.startsWith('//iam.googleapis.com/')",message="announce: Google needs the workload identity provider's full resource name as audience (//iam.googleapis.com/...)"
type IdentityToken struct {
	// Audience is the token's audience (its "aud" claim), as the cloud's
	// identity provider expects it: e.g. sts.amazonaws.com for AWS,
	// api://AzureADTokenExchange for Azure, and for Google the workload
	// identity provider's full resource name
	// (//iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Audience string `json:"audience"`

	// ExpirationSeconds is the token's requested lifetime, from 600 (the API
	// server's minimum) to 86400. The kubelet replaces the file before the
	// token expires.
	// +optional
	// +kubebuilder:default=3600
	// +kubebuilder:validation:Minimum=600
	// +kubebuilder:validation:Maximum=86400
	ExpirationSeconds *int64 `json:"expirationSeconds,omitempty"`

	// Announce sets the environment variable through which the named cloud's
	// SDKs find the token: AWS_WEB_IDENTITY_TOKEN_FILE (AWS),
	// AZURE_FEDERATED_TOKEN_FILE (Azure) or GOOGLE_APPLICATION_CREDENTIALS
	// (Google, pointing to an external_account credential configuration).
	// +optional
	// +kubebuilder:default=None
	Announce IdentityTokenAnnounce `json:"announce,omitempty"`

	// Env names an environment variable of the program that is set to the
	// token file's path, whatever announce says.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Env string `json:"env,omitempty"`
}

// GitSource fetches the program from a git repository. Its fields are inlined
// at the top level of the Stack spec, as in PKO.
type GitSource struct {
	// ProjectRepo is the URL of the git repository holding the Pulumi project.
	// +optional
	ProjectRepo string `json:"projectRepo,omitempty"`

	// Commit pins the revision to a commit SHA. Mutually exclusive with
	// branch; one of the two is required with projectRepo.
	// +optional
	Commit string `json:"commit,omitempty"`

	// Branch tracks a branch (short name or full ref such as refs/heads/main):
	// it is polled every resyncFrequencySeconds and each new commit is
	// deployed. Mutually exclusive with commit.
	// +optional
	Branch string `json:"branch,omitempty"`

	// RepoDir is the directory inside the repository that holds Pulumi.yaml.
	// +optional
	RepoDir string `json:"repoDir,omitempty"`

	// Shallow fetches only the wanted commit instead of the full history.
	// +optional
	Shallow bool `json:"shallow,omitempty"`

	// GitAuth configures credentials for the repository.
	// +optional
	GitAuth *GitAuthConfig `json:"gitAuth,omitempty"`

	// GitAuthSecret names a Secret whose keys select the authentication mode:
	// "sshPrivateKey" (+ optional "password"), else "accessToken", else
	// "username" + "password".
	// Deprecated: use gitAuth.
	// +optional
	GitAuthSecret string `json:"gitAuthSecret,omitempty"`
}

// GitAuthConfig holds git credentials. When several modes are set, the first
// of sshAuth, accessToken, basicAuth (PKO's order) is used.
// +kubebuilder:validation:XValidation:rule="has(self.accessToken) || has(self.sshAuth) || has(self.basicAuth) || has(self.githubApp)",message="spec.gitAuth must set one of accessToken, sshAuth, basicAuth or githubApp"
type GitAuthConfig struct {
	// AccessToken is a personal access token, used over HTTPS.
	// +optional
	AccessToken *ResourceRef `json:"accessToken,omitempty"`

	// SSHAuth is an SSH private key with an optional passphrase.
	// +optional
	SSHAuth *SSHAuth `json:"sshAuth,omitempty"`

	// BasicAuth is a user name and password, used over HTTPS.
	// +optional
	BasicAuth *BasicAuth `json:"basicAuth,omitempty"`

	// GitHubApp authenticates as a GitHub App installation. Its content is
	// kept verbatim (the shape follows PKO and is decoded by the source
	// layer).
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	GitHubApp *apiextensionsv1.JSON `json:"githubApp,omitempty"`
}

// SSHAuth is SSH key authentication for git.
type SSHAuth struct {
	// SSHPrivateKey is the PEM-encoded private key.
	SSHPrivateKey ResourceRef `json:"sshPrivateKey"`

	// Password is the key's passphrase, if it has one.
	// +optional
	Password *ResourceRef `json:"password,omitempty"`
}

// BasicAuth is user name and password authentication for git.
type BasicAuth struct {
	// UserName is the user name.
	UserName ResourceRef `json:"userName"`

	// Password is the password or token.
	Password ResourceRef `json:"password"`
}

// FluxSource points at a Flux source object whose artifact holds the program.
type FluxSource struct {
	// SourceRef identifies the Flux source object in the Stack's namespace.
	SourceRef FluxSourceReference `json:"sourceRef"`

	// Dir is the directory inside the artifact that holds Pulumi.yaml.
	// +optional
	Dir string `json:"dir,omitempty"`
}

// FluxSourceReference identifies a Flux source object by API version, kind and
// name.
type FluxSourceReference struct {
	// APIVersion of the source, e.g. "source.toolkit.fluxcd.io/v1".
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`

	// Kind of the source, e.g. "GitRepository", "OCIRepository" or "Bucket".
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`

	// Name of the source object.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ProgramReference names a Program object in the Stack's namespace.
type ProgramReference struct {
	// Name of the Program.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// PrerequisiteRef names another Stack that must have succeeded before this one
// is updated.
type PrerequisiteRef struct {
	// Name of the prerequisite Stack, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Requirement tightens what counts as satisfied. Without it the
	// prerequisite only has to be in a succeeded state.
	// +optional
	Requirement *RequirementSpec `json:"requirement,omitempty"`
}

// RequirementSpec lists conditions a prerequisite must meet.
type RequirementSpec struct {
	// SucceededWithinDuration requires the prerequisite's last success to be
	// no older than this duration (e.g. "1h"): a non-negative Go duration.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`
	SucceededWithinDuration *metav1.Duration `json:"succeededWithinDuration,omitempty"`
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

// ConfigMapRef selects one key of a ConfigMap in the Stack's namespace.
type ConfigMapRef struct {
	// Name of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Key within the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`

	// JSON parses the value as JSON and sets it as structured configuration;
	// otherwise the value is used as a plain string.
	// +optional
	JSON bool `json:"json,omitempty"`
}

// ResourceSelectorType says where a ResourceRef takes its value from.
// +kubebuilder:validation:Enum=Env;FS;Secret;Literal
type ResourceSelectorType string

const (
	// ResourceSelectorEnv reads an environment variable of the process that
	// runs the engine.
	ResourceSelectorEnv ResourceSelectorType = "Env"
	// ResourceSelectorFS reads a file from the file system of the process
	// that runs the engine.
	ResourceSelectorFS ResourceSelectorType = "FS"
	// ResourceSelectorSecret reads a key of a Secret in the Stack's namespace.
	ResourceSelectorSecret ResourceSelectorType = "Secret"
	// ResourceSelectorLiteral uses a value given inline.
	ResourceSelectorLiteral ResourceSelectorType = "Literal"
)

// ResourceRef says where a value (an environment variable, a secret config
// value, a credential) is loaded from. The selector matching type must be set.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'Env' || has(self.env)",message="a reference of type Env must set env.name"
// +kubebuilder:validation:XValidation:rule="self.type != 'FS' || has(self.filesystem)",message="a reference of type FS must set filesystem.path"
// +kubebuilder:validation:XValidation:rule="self.type != 'Secret' || has(self.secret)",message="a reference of type Secret must set secret.name and secret.key"
// +kubebuilder:validation:XValidation:rule="self.type != 'Literal' || has(self.literal)",message="a reference of type Literal must set literal.value"
type ResourceRef struct {
	// Type selects the selector used: Env, FS, Secret or Literal.
	Type ResourceSelectorType `json:"type"`

	ResourceSelector `json:",inline"`
}

// ResourceSelector holds the possible selectors of a ResourceRef; only the one
// matching the ResourceRef's type is used.
type ResourceSelector struct {
	// Env selects an environment variable.
	// +optional
	Env *EnvSelector `json:"env,omitempty"`

	// FileSystem selects a file.
	// +optional
	FileSystem *FSSelector `json:"filesystem,omitempty"`

	// Secret selects a key of a Secret.
	// +optional
	Secret *SecretSelector `json:"secret,omitempty"`

	// Literal is an inline value.
	// +optional
	Literal *LiteralRef `json:"literal,omitempty"`
}

// EnvSelector names an environment variable.
type EnvSelector struct {
	// Name of the environment variable.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// FSSelector names a file.
type FSSelector struct {
	// Path of the file.
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
}

// SecretSelector names a key of a Secret.
type SecretSelector struct {
	// Namespace of the Secret. Deprecated: references are resolved in the
	// Stack's own namespace; any other value is refused at reconcile time
	// (CrossNamespaceReference).
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Key within the Secret.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// LiteralRef is a value given inline.
type LiteralRef struct {
	// Value to use.
	Value string `json:"value"`
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

// StackStatus is the observed state of a Stack.
type StackStatus struct {
	// ObservedGeneration is the metadata.generation that was last fully
	// handled (its update succeeded, or it failed permanently).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ObservedReconcileRequest is the value of the
	// pulumi.com/reconciliation-request annotation that was last handled.
	// +optional
	ObservedReconcileRequest string `json:"observedReconcileRequest,omitempty"`

	// Conditions: Ready, Reconciling and Stalled follow kstatus; SourceReady,
	// DriftDetected and Suspended are Stackwright's own.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// Outputs are the stack outputs of the last successful update. Secret
	// outputs never appear here; they are written to a Secret.
	// +optional
	Outputs map[string]apiextensionsv1.JSON `json:"outputs,omitempty"`

	// LastUpdate describes the last finished update.
	// +optional
	LastUpdate *StackUpdateState `json:"lastUpdate,omitempty"`

	// CurrentUpdate describes the update in flight, if any. It is recorded
	// before the Update object is created so that a crash in between cannot
	// start a second one.
	// +optional
	CurrentUpdate *CurrentStackUpdate `json:"currentUpdate,omitempty"`

	// ProjectInfo caches the project name and runtime read from Pulumi.yaml,
	// so the stack can still be destroyed when its source is gone.
	// +optional
	ProjectInfo *ProjectInfo `json:"projectInfo,omitempty"`

	// DriftDetection reports the state of scheduled drift checks.
	// +optional
	DriftDetection *DriftDetectionStatus `json:"driftDetection,omitempty"`

	// Stackwright holds the bookkeeping Stackwright needs beyond PKO's status
	// to decide, after a restart, whether work is due.
	// +optional
	Stackwright *StackwrightStatus `json:"stackwright,omitempty"`
}

// StackwrightStatus is Stackwright's own part of a Stack's status.
type StackwrightStatus struct {
	// DesiredStateKey is the hash of everything the current desired state is
	// derived from: source revision and artifact, spec generation, referenced
	// ConfigMaps and Secrets, and operation options.
	// +optional
	DesiredStateKey string `json:"desiredStateKey,omitempty"`

	// LastSuccessfulKey is the desired-state key of the last successful
	// update; when it equals DesiredStateKey nothing needs to run.
	// +optional
	LastSuccessfulKey string `json:"lastSuccessfulKey,omitempty"`

	// LastAttemptedKey is the desired-state key of the last finished update,
	// successful or not.
	// +optional
	LastAttemptedKey string `json:"lastAttemptedKey,omitempty"`

	// Attempt numbers the updates started for LastAttemptedKey (or for the
	// key in flight), starting at 1; it is part of the Update's name.
	// +optional
	Attempt int32 `json:"attempt,omitempty"`

	// PermanentFailures counts consecutive permanent failures; the Stack
	// stalls when it reaches the manager's limit.
	// +optional
	PermanentFailures int32 `json:"permanentFailures,omitempty"`

	// LastArtifact is the artifact of the last update that may have created
	// resources. Destroy on deletion uses it, so a Stack can be destroyed
	// after its Program or repository is gone.
	// +optional
	LastArtifact *ArtifactRef `json:"lastArtifact,omitempty"`
}

// ArtifactRef names an immutable program artifact.
type ArtifactRef struct {
	// Revision is the source revision (commit SHA, Flux revision, or
	// Program generation).
	// +optional
	Revision string `json:"revision,omitempty"`

	// Digest is the artifact's content digest, "sha256:<hex>".
	// +optional
	Digest string `json:"digest,omitempty"`

	// Dir is the project directory inside the artifact ("" for its root).
	// +optional
	Dir string `json:"dir,omitempty"`
}

// UpdateState is the outcome recorded in status.lastUpdate.state.
// +kubebuilder:validation:Enum=succeeded;failed
type UpdateState string

const (
	// UpdateStateSucceeded records a successful update.
	UpdateStateSucceeded UpdateState = "succeeded"
	// UpdateStateFailed records a failed update.
	UpdateStateFailed UpdateState = "failed"
)

// StackUpdateState describes the last finished update of a Stack.
type StackUpdateState struct {
	// Generation is the Stack generation the update ran for.
	// +optional
	Generation int64 `json:"generation,omitempty"`

	// ReconcileRequest is the reconciliation-request annotation value the
	// update ran for.
	// +optional
	ReconcileRequest string `json:"reconcileRequest,omitempty"`

	// Name is the name of the Update object.
	// +optional
	Name string `json:"name,omitempty"`

	// Type is the operation: preview, up, refresh, destroy (or drift).
	// +optional
	Type string `json:"type,omitempty"`

	// State is succeeded or failed.
	// +optional
	State UpdateState `json:"state,omitempty"`

	// Message is the engine's summary, or the error of a failed update.
	// +optional
	Message string `json:"message,omitempty"`

	// LastAttemptedCommit is the source revision of the last attempt.
	// +optional
	LastAttemptedCommit string `json:"lastAttemptedCommit,omitempty"`

	// LastSuccessfulCommit is the source revision last applied successfully.
	// +optional
	LastSuccessfulCommit string `json:"lastSuccessfulCommit,omitempty"`

	// Permalink is the backend's URL for the operation, when it has one.
	// +optional
	Permalink string `json:"permalink,omitempty"`

	// LastResyncTime is when the update finished.
	// +optional
	LastResyncTime *metav1.Time `json:"lastResyncTime,omitempty"`

	// Failures counts consecutive failed attempts; it drives the retry
	// backoff and resets to 0 on success.
	// +optional
	Failures int64 `json:"failures,omitempty"`
}

// CurrentStackUpdate describes the update in flight.
type CurrentStackUpdate struct {
	// Generation is the Stack generation the update runs for.
	// +optional
	Generation int64 `json:"generation,omitempty"`

	// ReconcileRequest is the reconciliation-request annotation value the
	// update runs for.
	// +optional
	ReconcileRequest string `json:"reconcileRequest,omitempty"`

	// Name is the name of the Update object.
	// +optional
	Name string `json:"name,omitempty"`

	// Commit is the source revision being applied.
	// +optional
	Commit string `json:"commit,omitempty"`
}

// ProjectInfo is what Pulumi.yaml says about the project.
type ProjectInfo struct {
	// Name of the Pulumi project.
	// +optional
	Name string `json:"name,omitempty"`

	// Runtime of the Pulumi project (nodejs, python, go, yaml, ...).
	// +optional
	Runtime string `json:"runtime,omitempty"`
}

// DriftDetectionStatus reports on scheduled drift checks.
type DriftDetectionStatus struct {
	// LastCheck is when the last drift check finished.
	// +optional
	LastCheck *metav1.Time `json:"lastCheck,omitempty"`
}

// Stack is a Pulumi stack reconciled by Stackwright.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={pulumi,stackwright},shortName=stk
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Stack",type=string,priority=10,JSONPath=`.spec.stack`
// +kubebuilder:printcolumn:name="Last Commit",type=string,JSONPath=`.status.lastUpdate.lastSuccessfulCommit`
// +kubebuilder:printcolumn:name="Last Update",type=date,JSONPath=`.status.lastUpdate.lastResyncTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Stack struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StackSpec   `json:"spec"`
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
