package v1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

	// ProjectInfo is PKO's record of the project's name and runtime. Stackwright
	// never writes it: destroy on deletion uses the last deployed artifact
	// (status.stackwright.lastArtifact), which holds the whole project.
	// +optional
	ProjectInfo *ProjectInfo `json:"projectInfo,omitempty"`

	// DriftDetection reports the state of scheduled drift checks.
	// +optional
	DriftDetection *DriftDetectionStatus `json:"driftDetection,omitempty"`

	// OutputsExport says where the Stack's outputs are published
	// (spec.stackwright.outputs).
	// +optional
	OutputsExport *OutputsExportStatus `json:"outputsExport,omitempty"`

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

	// DesiredStateGeneration is the generation of the spec DesiredStateKey was derived
	// from: until the Stack is reconciled past a new spec, the key is the earlier spec's,
	// while its conditions may already speak of the new generation.
	// +optional
	DesiredStateGeneration int64 `json:"desiredStateGeneration,omitempty"`

	// LastSuccessfulKey is the desired-state key of the last successful
	// update; when it equals DesiredStateKey nothing needs to run.
	// +optional
	LastSuccessfulKey string `json:"lastSuccessfulKey,omitempty"`

	// LastSuccessTime is when the last successful update (up, or destroy)
	// finished; a failure after it leaves it as it is.
	// +optional
	LastSuccessTime *metav1.Time `json:"lastSuccessTime,omitempty"`

	// LastAttemptedKey is the desired-state key of the last finished update,
	// successful or not.
	// +optional
	LastAttemptedKey string `json:"lastAttemptedKey,omitempty"`

	// Attempt numbers the updates started for LastAttemptedKey (or for the
	// key in flight), starting at 1; it is part of the Update's name.
	// +optional
	Attempt int32 `json:"attempt,omitempty"`

	// LostUpdates names the ups of LastAttemptedKey, newest last, whose runners were lost
	// before they reported (the manager restarted, a runner Pod vanished): their engine
	// runs may have completed. The next up looks for them in the backend's history and
	// records a completed one instead of applying the same desired state twice. Cleared
	// by a success and by a new desired state.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	LostUpdates []string `json:"lostUpdates,omitempty"`

	// PermanentFailures counts consecutive permanent failures; the Stack
	// stalls when it reaches the manager's limit.
	// +optional
	PermanentFailures int32 `json:"permanentFailures,omitempty"`

	// LastFailureReason is the reason the last failed Update gave for its failure
	// (its Complete condition's reason, such as UpdateConflict); cleared by a success.
	// +optional
	LastFailureReason string `json:"lastFailureReason,omitempty"`

	// LastArtifact is the artifact of the last update that may have created
	// resources. Destroy on deletion uses it, so a Stack can be destroyed
	// after its Program or repository is gone.
	// +optional
	LastArtifact *ArtifactRef `json:"lastArtifact,omitempty"`

	// RemediateDrift is set when a drift check with autoRemediate found drift: the next
	// reconcile runs an update although the desired state is deployed.
	// +optional
	RemediateDrift bool `json:"remediateDrift,omitempty"`

	// IgnoredFieldsGeneration is the generation whose ignored fields the
	// FieldsIgnored event has announced, so it is emitted once per generation.
	// +optional
	IgnoredFieldsGeneration int64 `json:"ignoredFieldsGeneration,omitempty"`

	// Approval is where the current change stands in its preview and approval
	// (spec.stackwright.approval: Manual).
	// +optional
	Approval *ApprovalStatus `json:"approval,omitempty"`

	// Rollout is set while a StackRollout selects the Stack: which one, what the source
	// offers, and the revision the Stack is held at while its wave is closed.
	// +optional
	Rollout *StackRolloutState `json:"rollout,omitempty"`

	// ExpiresAt is when the Stack's TTL (spec.stackwright.ttl) expires.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// ExpiredAt is when the Stack was found expired: from then on it is being
	// destroyed and deleted, whatever destroyOnFinalize says.
	// +optional
	ExpiredAt *metav1.Time `json:"expiredAt,omitempty"`
}

// ApprovalState is where a change stands in its preview and approval.
type ApprovalState string

const (
	// ApprovalPreviewing: the preview Update is computing the change's plan.
	ApprovalPreviewing ApprovalState = "Previewing"
	// ApprovalAwaiting: the preview succeeded; nothing happens until it is
	// approved or rejected, or the desired state changes.
	ApprovalAwaiting ApprovalState = "AwaitingApproval"
	// ApprovalApproved: the preview was approved (or planned no change); the up
	// held to its plan runs or has run.
	ApprovalApproved ApprovalState = "Approved"
	// ApprovalRejected: the stackwright.dev/reject annotation rejected it.
	ApprovalRejected ApprovalState = "Rejected"
	// ApprovalFailed: the preview failed; it is retried like a failed update.
	ApprovalFailed ApprovalState = "Failed"
	// ApprovalBlocked: a mandatory policy denied the change, or a policy could not
	// be judged; nothing is applied.
	ApprovalBlocked ApprovalState = "Blocked"
)

// PolicyViolation is one message of one policy about the previewed change.
type PolicyViolation struct {
	// Policy names the policy ("Policy <namespace>/<name>" or "ClusterPolicy <name>").
	Policy string `json:"policy"`
	// Enforcement is mandatory or advisory; "error" for a policy that could not be
	// judged.
	Enforcement string `json:"enforcement"`
	// Message is the deny rule's message, or the error.
	Message string `json:"message"`
}

// ApprovalStatus is the preview of the current change and what became of it.
type ApprovalStatus struct {
	// Preview names the preview Update of the change, whose plan an approved up
	// is held to.
	Preview string `json:"preview"`

	// State is Previewing, AwaitingApproval, Approved, Rejected, Blocked or Failed.
	State ApprovalState `json:"state"`

	// DesiredStateKey and Attempt are the desired state, and the try at it,
	// that the preview was made for: an approval counts only for them.
	DesiredStateKey string `json:"desiredStateKey"`
	Attempt         int32  `json:"attempt"`

	// Revision is the source revision previewed.
	// +optional
	Revision string `json:"revision,omitempty"`

	// Summary is the preview's change summary, e.g. "1 to create, 1 to delete".
	// +optional
	Summary string `json:"summary,omitempty"`

	// Message says why an earlier preview's approval was voided, if one was.
	// +optional
	Message string `json:"message,omitempty"`

	// PolicyKey identifies the policies (and their generations) that judged the
	// preview; another set makes a new preview.
	// +optional
	PolicyKey string `json:"policyKey,omitempty"`

	// Violations are what the policies found in the preview, advisory ones
	// included.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Violations []PolicyViolation `json:"violations,omitempty"`

	// Previews counts the previews made for this Stack; it numbers their names.
	// +optional
	Previews int64 `json:"previews,omitempty"`

	// HandledApproval and HandledRejection are the annotation values last acted
	// on, so that each value is acted on (or refused) once.
	// +optional
	HandledApproval string `json:"handledApproval,omitempty"`
	// +optional
	HandledRejection string `json:"handledRejection,omitempty"`
}

// StackRolloutState is where a Stack stands in the StackRollout that selects it.
type StackRolloutState struct {
	// Name of the StackRollout.
	Name string `json:"name"`

	// Available is the revision the Stack's source offers now (its artifact without the
	// project directory), which the rollout rolls out.
	// +optional
	Available *ArtifactRef `json:"available,omitempty"`

	// HeldAt is the revision the Stack is held at while the rollout keeps it from the
	// available one; empty when it may deploy what its source offers.
	// +optional
	HeldAt string `json:"heldAt,omitempty"`
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

	// Type is the operation in flight when it is not the Stack's own (a drift check, a
	// one-off operation).
	// +optional
	Type string `json:"type,omitempty"`

	// Request names the auto.pulumi.com Update (a one-off operation someone asked for)
	// that the update in flight runs.
	// +optional
	Request string `json:"request,omitempty"`
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

// OutputsExportStatus says which objects hold the Stack's outputs, and whose
// outputs they are.
type OutputsExportStatus struct {
	// SecretName is the Secret that holds every output.
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// ConfigMapName is the ConfigMap that holds the outputs that are not secret.
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`

	// Update names the Update whose outputs were published.
	// +optional
	Update string `json:"update,omitempty"`

	// LastExportTime is when the objects were last written.
	// +optional
	LastExportTime *metav1.Time `json:"lastExportTime,omitempty"`

	// Skipped lists outputs left out because their names cannot be keys of a
	// Secret or ConfigMap (allowed: letters, digits, '-', '_' and '.').
	// +optional
	// +listType=atomic
	Skipped []string `json:"skipped,omitempty"`
}

// DriftDetectionStatus reports on scheduled drift checks.
type DriftDetectionStatus struct {
	// LastCheck is when the last drift check finished.
	// +optional
	LastCheck *metav1.Time `json:"lastCheck,omitempty"`

	// LastUpdate names the Update of the last drift check.
	// +optional
	LastUpdate string `json:"lastUpdate,omitempty"`
}
