package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	// executor the Stack is stalled (SpecInvalid) instead of running without
	// them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.audience == a.audience))",message="each audience may appear only once"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !has(a.announce) || a.announce == 'None' || self.exists_one(b, has(b.announce) && b.announce == a.announce))",message="at most one token may announce each cloud (AWS, Azure, Google)"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !has(a.env) || self.exists_one(b, has(b.env) && b.env == a.env))",message="each env name may appear only once"
	IdentityTokens []IdentityToken `json:"identityTokens,omitempty"`

	// Outputs publishes the Stack's outputs, after each successful update, to a
	// Secret and/or a ConfigMap in the Stack's namespace, for Pods (envFrom,
	// volumes) and other Stacks (configRef, envRefs) to read.
	// +optional
	Outputs *OutputsExport `json:"outputs,omitempty"`

	// Approval says whether a change needs a person's approval before it is
	// applied. Auto (the default) applies every new desired state as soon as it
	// is seen. Manual first previews it, saving the update plan, and then waits
	// (Reconciling, reason AwaitingApproval, naming the preview Update) until
	// the stackwright.dev/approve annotation names that preview; the up is then
	// held to exactly that plan. A new desired state before the approval voids
	// it and makes a new preview. A preview that plans no change is applied
	// without asking.
	// +optional
	Approval ApprovalMode `json:"approval,omitempty"`

	// Plugins names the plugin bundles (providers, language hosts) mounted into
	// this Stack's runner Pods, from those the install offers (the manager's
	// --plugin-bundle; a release offers the Kubernetes provider as kubernetes).
	// Unset or empty means the install's default bundles. A program that needs a
	// plugin no selected bundle holds fails with reason MissingPlugin, and so
	// does a Stack that names a bundle the install does not offer. Only the job
	// executor mounts bundles: the local executor runs the engine with the
	// plugins on the manager's own PATH and ignores this list.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=50
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Plugins []string `json:"plugins,omitempty"`

	// TTL destroys the stack's resources and deletes the Stack once it expires:
	// after a duration from the Stack's creation, or from its last update. The
	// stackwright.dev/expires-at annotation (an RFC 3339 time; kubectl
	// stackwright extend sets it) pushes the expiry back, never forward. A
	// suspended Stack does not expire while suspended.
	// +optional
	TTL *StackTTL `json:"ttl,omitempty"`
}

// StackTTL is how long a Stack lives.
type StackTTL struct {
	// After is the Stack's life, e.g. 72h.
	After metav1.Duration `json:"after"`
	// From is what After counts from: Creation (the default), or LastUpdate (the end
	// of its last update of any kind, or its creation before it had one).
	// +optional
	From TTLFrom `json:"from,omitempty"`
}

// TTLFrom names what a TTL counts from.
// +kubebuilder:validation:Enum=Creation;LastUpdate
type TTLFrom string

const (
	// TTLFromCreation counts from the Stack's creation.
	TTLFromCreation TTLFrom = "Creation"
	// TTLFromLastUpdate counts from the Stack's last update.
	TTLFromLastUpdate TTLFrom = "LastUpdate"
)

// ExpiresAtAnnotation pushes a Stack's TTL expiry back to the RFC 3339 time it holds.
const ExpiresAtAnnotation = "stackwright.dev/expires-at"

// ApprovalMode says who lets a change through.
// +kubebuilder:validation:Enum=Auto;Manual
type ApprovalMode string

const (
	// ApprovalAuto applies changes without asking anyone.
	ApprovalAuto ApprovalMode = "Auto"
	// ApprovalManual applies a change only once a person approved its preview.
	ApprovalManual ApprovalMode = "Manual"
)

// OutputsExport names the objects a Stack's outputs are published to. Each
// output is one key; a string output is its text, any other value its JSON.
// Stackwright creates the objects, owns them (they go with the Stack) and
// refuses to take over one it did not create.
// +kubebuilder:validation:XValidation:rule="has(self.secretName) || has(self.configMapName)",message="set secretName, configMapName or both"
type OutputsExport struct {
	// SecretName names the Secret that receives every output, secret ones
	// included.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SecretName string `json:"secretName,omitempty"`

	// ConfigMapName names the ConfigMap that receives the outputs that are not
	// secret. Secret outputs never go there.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ConfigMapName string `json:"configMapName,omitempty"`
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
