package v1

// Annotations, labels and finalizers shared with PKO. The names are PKO's own,
// so objects created under PKO keep working when Stackwright takes over.
const (
	// ReconcileRequestAnnotation requests a new reconciliation when its value
	// changes (any value, typically a timestamp); the value handled last is
	// echoed in status.observedReconcileRequest.
	ReconcileRequestAnnotation = "pulumi.com/reconciliation-request"

	// StackFinalizer guards a Stack's deletion until its resources have been
	// destroyed (destroyOnFinalize) or released.
	StackFinalizer = "finalizer.stack.pulumi.com"
)

// InputsFinalizer is Stackwright's own: it keeps a Secret or ConfigMap that a
// destroyOnFinalize Stack reads while the Stack holds StackFinalizer, so that deleting the
// namespace leaves the destroy its inputs. Deleting the object itself (not its namespace)
// is not held up.
const InputsFinalizer = "stackwright.dev/stack-inputs"

// ProtectedAnnotation, set to "true" on a Stack or a template instance, protects it from
// deletion: the install's admission policy (stackwright-deletion-protection) refuses to
// delete it until the annotation is removed (or set to anything else).
const ProtectedAnnotation = "stackwright.dev/protected"

// Stackwright's own annotations of a Stack with spec.stackwright.approval: Manual.
const (
	// ApproveAnnotation approves a change: its value names the preview Update
	// awaiting approval (status.stackwright.approval.preview), whose plan the up
	// is then held to. A value naming any other Update is refused with an
	// ApprovalRefused event.
	ApproveAnnotation = "stackwright.dev/approve"

	// RejectAnnotation rejects a change: its value names the preview Update
	// awaiting approval. Nothing is applied; the Stack is Stalled until a new
	// desired state (or a reconcile request) makes a new preview.
	RejectAnnotation = "stackwright.dev/reject"
)

// Condition types of Stacks (and, for Ready, of Programs). Ready, Reconciling
// and Stalled follow the kstatus conventions: while work is in progress
// Reconciling=True and Ready=False; when the desired state is reached
// Ready=True; when progress needs a human, Stalled=True and Ready=False.
const (
	// ConditionReady is True when the last update for the current desired
	// state succeeded and nothing is pending.
	ConditionReady = "Ready"

	// ConditionReconciling is True while Stackwright is working toward the
	// desired state (resolving the source, waiting for or running an update,
	// backing off before a retry).
	ConditionReconciling = "Reconciling"

	// ConditionStalled is True when Stackwright has stopped retrying and needs
	// a change to the spec, its references or its source to make progress.
	ConditionStalled = "Stalled"

	// ConditionSourceReady is True when the Stack's source resolved to a
	// revision and an artifact that runners can fetch.
	ConditionSourceReady = "SourceReady"

	// ConditionDriftDetected is True when the last drift check found resources
	// whose real state differs from the stack's state.
	ConditionDriftDetected = "DriftDetected"

	// ConditionSuspended is True while spec.stackwright.suspend is set.
	ConditionSuspended = "Suspended"

	// ConditionHeldBack is True while a StackRollout keeps the Stack at an older revision
	// than its source offers (status.stackwright.rollout says which and why); Ready then
	// speaks of the revision it is held at.
	ConditionHeldBack = "HeldBack"
)

// Reasons of the HeldBack condition, and of a Stack that two rollouts select.
const (
	// ReasonWaveClosed (HeldBack=True): the Stack's wave of the rollout is not open yet.
	ReasonWaveClosed = "WaveClosed"
	// ReasonRolloutAborted (HeldBack=True): the rollout aborted the revision the source
	// offers.
	ReasonRolloutAborted = "RolloutAborted"
	// ReasonRolloutPending (HeldBack=True): the rollout has not started the revision the
	// source offers (another rollout is in progress, or it has not looked yet).
	ReasonRolloutPending = "RolloutPending"
	// ReasonRolloutConflict (Stalled=True): more than one StackRollout selects the Stack
	// (on a template's instance: more than one rollout of the template's revisions selects
	// its Stack).
	ReasonRolloutConflict = "RolloutConflict"
	// ReasonRolloutArtifactMissing (Reconciling=True): the artifact the rollout holds the
	// Stack at is no longer in the manager's store (its volume was lost); the Stack waits.
	ReasonRolloutArtifactMissing = "RolloutArtifactMissing"
)

// Condition reasons. Each is a CamelCase token suitable for metav1.Condition.
const (
	// ReasonProcessingCompleted (Ready=True): the desired state has been
	// applied and nothing is pending. PKO's name.
	ReasonProcessingCompleted = "ProcessingCompleted"

	// ReasonNotReadyInProgress (Ready=False while Reconciling=True): PKO's
	// name; the Reconciling condition says what is in progress.
	ReasonNotReadyInProgress = "NotReadyInProgress"

	// ReasonNotReadyStalled (Ready=False while Stalled=True): PKO's name; the
	// Stalled condition says what a human must do.
	ReasonNotReadyStalled = "NotReadyStalled"

	// ReasonStackProcessing (Reconciling=True): work toward the desired state has
	// started but no update is running yet (resolving the source, preparing).
	// PKO's name.
	ReasonStackProcessing = "StackProcessing"

	// ReasonUpdateInProgress (Reconciling=True): an Update for the current
	// desired state is queued or running.
	ReasonUpdateInProgress = "UpdateInProgress"

	// ReasonRetryingAfterFailure (Reconciling=True): the last update failed
	// with a transient error and will be retried after a backoff.
	ReasonRetryingAfterFailure = "RetryingAfterFailure"

	// ReasonUpdateFailed (Ready=False, Stalled=True once retries are
	// exhausted): the engine reported a permanent failure for the update.
	ReasonUpdateFailed = "UpdateFailed"

	// ReasonSourceUnavailable (SourceReady=False; Stalled=True if it
	// persists): the repository, Flux source or Program could not be resolved
	// or fetched.
	ReasonSourceUnavailable = "SourceUnavailable"

	// ReasonConfigUnavailable (Ready=False): a referenced Secret, ConfigMap or
	// key for env, config or credentials does not exist or cannot be read.
	ReasonConfigUnavailable = "ConfigUnavailable"

	// ReasonCrossNamespaceReference (Stalled=True): the spec references an
	// object in another namespace, which is refused.
	ReasonCrossNamespaceReference = "CrossNamespaceReference"

	// ReasonSpecInvalid (Stalled=True): the spec passed admission but cannot
	// be processed as written.
	ReasonSpecInvalid = "SpecInvalid"

	// ReasonMissingPlugin (Stalled=True): the program needs a plugin (a provider,
	// a language host) that its runner does not have, or the Stack selects a
	// plugin bundle the install does not offer; the message names it and how to
	// provide it. Nothing is retried until the spec, its references or the
	// source change, or the reconcile-request annotation is set.
	ReasonMissingPlugin = "MissingPlugin"

	// ReasonPrerequisiteNotSatisfied (Reconciling=True): a prerequisite Stack
	// is not Ready, or did not succeed recently enough.
	ReasonPrerequisiteNotSatisfied = "PrerequisiteNotSatisfied"

	// ReasonSuspended (Suspended=True, Ready unchanged): engine runs are
	// paused by spec.stackwright.suspend.
	ReasonSuspended = "Suspended"

	// ReasonDestroyInProgress (Reconciling=True): the Stack is being deleted
	// and its destroy operation is queued or running.
	ReasonDestroyInProgress = "DestroyInProgress"

	// ReasonDestroyFailed (Stalled=True or Reconciling=True while retrying):
	// the destroy run on deletion failed; the finalizer stays in place.
	ReasonDestroyFailed = "DestroyFailed"

	// ReasonUpdateConflict (Reconciling=True): the last update or destroy found
	// the stack locked by another update, or by one whose holder could not be
	// proven gone; the Stack waits and tries again, and never stalls on it (PKO
	// stalled unless retryOnUpdateConflict was set). The message lists the locks.
	ReasonUpdateConflict = "UpdateConflict"

	// ReasonArtifactReady (SourceReady=True; Ready=True on Programs): the
	// source resolved to an artifact that runners can fetch.
	ReasonArtifactReady = "ArtifactReady"

	// ReasonOutputsExportConflict (Stalled=True): the Secret or ConfigMap that
	// spec.stackwright.outputs names exists and was not created by this Stack;
	// Stackwright does not take it over.
	ReasonOutputsExportConflict = "OutputsExportConflict"

	// ReasonDriftFound (DriftDetected=True): the last drift check found
	// changes.
	ReasonDriftFound = "DriftFound"

	// ReasonNoDrift (DriftDetected=False): the last drift check found no
	// changes.
	ReasonNoDrift = "NoDrift"

	// ReasonPreviewInProgress (Reconciling=True): approval is Manual and the
	// change is being previewed, its plan saved, before anyone is asked.
	ReasonPreviewInProgress = "PreviewInProgress"

	// ReasonAwaitingApproval (Reconciling=True): approval is Manual and the
	// preview Update the message names waits for the stackwright.dev/approve
	// annotation to name it. Nothing is applied meanwhile.
	ReasonAwaitingApproval = "AwaitingApproval"

	// ReasonPolicyViolation (Stalled=True): a mandatory policy denied the
	// previewed change; nothing was applied. A new desired state, or a change of
	// the policies that select the Stack, makes a new preview.
	ReasonPolicyViolation = "PolicyViolation"

	// ReasonPolicyInvalid (Stalled=True): a policy selecting the Stack does not
	// compile or could not be evaluated; nothing was applied until it is fixed.
	ReasonPolicyInvalid = "PolicyInvalid"

	// ReasonApprovalRejected (Stalled=True): the stackwright.dev/reject
	// annotation rejected the previewed change; a new desired state or a
	// reconcile request makes a new preview.
	ReasonApprovalRejected = "ApprovalRejected"

	// ReasonExpired (Reconciling=True): the Stack's TTL (spec.stackwright.ttl)
	// expired; its resources are being destroyed and the Stack deleted.
	ReasonExpired = "Expired"
	// ReasonInUse (Reconciling=True, while the Stack is being deleted): other Stacks read
	// the outputs it publishes (spec.stackwright.outputs) as their inputs; it is destroyed
	// and released once they are gone, so that their own destroys still find those values.
	ReasonInUse = "InUse"
	// ReasonDeletionProtected (Stalled=True): the Stack's TTL expired, but it is protected
	// (stackwright.dev/protected): remove the annotation to let it be destroyed and deleted.
	ReasonDeletionProtected = "DeletionProtected"
)
