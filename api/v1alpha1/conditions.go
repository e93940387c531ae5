package v1alpha1

// ConditionComplete is set on an Update when it finishes: True when the operation
// succeeded, False otherwise. Its reason tells the Stack controller how to retry.
const ConditionComplete = "Complete"

// ConditionReconciling is True while the Update runs (reason Running) and absent
// otherwise, so that kstatus reads a running Update as InProgress.
const ConditionReconciling = "Reconciling"

// ConditionStalled is True once the Update has failed, with the Complete condition's
// reason and message: the Update never runs again, so kstatus reads it as Failed. Whether
// the operation is retried, with a new Update, is the Stack's decision.
const ConditionStalled = "Stalled"

// ReasonRunning is the Reconciling condition's reason while a runner executes the Update.
const ReasonRunning = "Running"

// Reasons of the Complete condition (and of Stalled, which repeats a failure's reason).
const (
	// ReasonSucceeded: the operation completed.
	ReasonSucceeded = "Succeeded"
	// ReasonTransientFailure: the operation failed for a reason that may clear by itself
	// (network, backend unavailable); retried with backoff, never stalls.
	ReasonTransientFailure = "TransientFailure"
	// ReasonUpdateConflict: another update held the stack's lock. The Stack waits for the
	// lock and tries again; a conflict never counts toward stalling.
	ReasonUpdateConflict = "UpdateConflict"
	// ReasonPermanentFailure: the program, its config or its options are wrong; retrying
	// the same desired state is unlikely to help, so the Stack stalls after a few.
	ReasonPermanentFailure = "PermanentFailure"
	// ReasonCancelled: the operation was interrupted (manager shutdown); retried.
	ReasonCancelled = "Cancelled"
	// ReasonPlanInvalid: an up held to an approved plan met a change the plan does not
	// allow (the program, its config or the resources moved since the preview). The
	// approval is void; a new preview is made.
	ReasonPlanInvalid = "PlanInvalid"
	// ReasonRunnerLost: the runner disappeared while the Update was running (the manager
	// restarted); retried.
	ReasonRunnerLost = "RunnerLost"
	// ReasonRecovered: the runner was lost before it reported, but the engine run had
	// completed: a later Update found it in the backend's history (its
	// status.recovered names this Update) and recorded it here.
	ReasonRecovered = "Recovered"
)

// PlanSecretSuffix names the Secret holding the update plan a preview saved:
// <update>-plan, with the plan (JSON, secret values encrypted by the stack's secrets
// provider) under PlanSecretKey.
const (
	PlanSecretSuffix = "-plan"
	PlanSecretKey    = "plan.json"
)

// OutputsSecretSuffix names the Secret holding an Update's outputs: <update>-outputs.
const OutputsSecretSuffix = "-outputs"

// SecretOutputsAnnotation on an outputs Secret lists, comma-separated, the outputs the
// engine marked secret, so that readers can mask them.
const SecretOutputsAnnotation = "stackwright.dev/secret-outputs"
