package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StackLabel is set on every Update to the name of the Stack it belongs to, so
// a Stack's Updates can be listed with a label selector.
const StackLabel = "stackwright.dev/stack"

// RequestLabel is set on an Update that runs a one-off operation someone asked for, to
// the name of the auto.pulumi.com Update that asked (when the name fits a label value).
const RequestLabel = "stackwright.dev/request"

// LabelManagedBy, with value ManagedBy, marks the objects Stackwright creates for its runs
// (runner Jobs and their Pods, work Secrets, rollout gate Jobs): what the executors find
// their runners by, and what the manager-rights admission policy lets the manager create.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "stackwright"
)

// UpdateQueue is where a Pending Update stands in its executor's queue. Tenants (namespaces,
// or namespaces sharing the manager's --tenant-label value) take turns, so Ahead counts
// this tenant's earlier Updates and, from each other tenant, as many as get a turn before
// this one.
type UpdateQueue struct {
	// Ahead is how many queued Updates are expected to start before this one: exact up
	// to 10, rounded down to tens past that.
	Ahead int32 `json:"ahead"`
	// Reason is why the Update waits: AllSlotsBusy (every runner slot is taken) or
	// TenantAtLimit (its tenant holds every slot a tenant may hold:
	// --max-concurrent-updates-per-namespace).
	Reason string `json:"reason"`
	// RunningUpdates and Slots are the Updates running and the slots of the executor.
	RunningUpdates int32 `json:"runningUpdates"`
	Slots          int32 `json:"slots"`
	// EstimatedWaitSeconds is a rough guess, rounded to minutes, from the recent runs'
	// mean duration and the turns ahead; absent until a run has finished.
	// +optional
	EstimatedWaitSeconds *int64 `json:"estimatedWaitSeconds,omitempty"`
}

// Reasons of UpdateQueue.
const (
	QueueReasonAllSlotsBusy  = "AllSlotsBusy"
	QueueReasonTenantAtLimit = "TenantAtLimit"
)

// MaxLogTailLength is the largest status.logTail accepted, in bytes.
const MaxLogTailLength = 8192

// MaxOutputsInStatus bounds, in bytes of JSON, the outputs an Update's status.outputs
// carries: larger ones go to the outputs Secret, so that an Update (which the manager
// caches with its history) stays small.
const MaxOutputsInStatus = 4096

// UpdateType is the engine operation an Update runs.
// +kubebuilder:validation:Enum=preview;up;refresh;destroy;drift
type UpdateType string

const (
	// UpdateTypePreview computes the changes an update would make, without
	// making them.
	UpdateTypePreview UpdateType = "preview"
	// UpdateTypeUp applies the program (pulumi up).
	UpdateTypeUp UpdateType = "up"
	// UpdateTypeRefresh reconciles the stack's state with the real resources.
	UpdateTypeRefresh UpdateType = "refresh"
	// UpdateTypeDestroy deletes all resources of the stack.
	UpdateTypeDestroy UpdateType = "destroy"
	// UpdateTypeDrift is a drift check: a refresh preview that changes
	// nothing and reports differences.
	UpdateTypeDrift UpdateType = "drift"
)

// UpdatePhase is where an Update is in its life.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type UpdatePhase string

const (
	// UpdatePhasePending: created, not yet picked up by a runner.
	UpdatePhasePending UpdatePhase = "Pending"
	// UpdatePhaseRunning: a runner is executing the operation.
	UpdatePhaseRunning UpdatePhase = "Running"
	// UpdatePhaseSucceeded: finished with result succeeded.
	UpdatePhaseSucceeded UpdatePhase = "Succeeded"
	// UpdatePhaseFailed: finished with result failed or cancelled, or the
	// runner was lost.
	UpdatePhaseFailed UpdatePhase = "Failed"
)

// UpdateResult is the outcome of a finished Update.
// +kubebuilder:validation:Enum=succeeded;failed;cancelled
type UpdateResult string

const (
	// UpdateResultSucceeded: the operation completed.
	UpdateResultSucceeded UpdateResult = "succeeded"
	// UpdateResultFailed: the operation reported an error.
	UpdateResultFailed UpdateResult = "failed"
	// UpdateResultCancelled: the operation was cancelled before it completed.
	UpdateResultCancelled UpdateResult = "cancelled"
)

// UpdateSpec says which operation to run on which Stack, on which revision. It
// is immutable: a retry is a new Update with a higher attempt.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable; create a new Update instead"
type UpdateSpec struct {
	// StackName is the name of the Stack, in the Update's namespace.
	// +kubebuilder:validation:MinLength=1
	StackName string `json:"stackName"`

	// Type is the operation to run.
	Type UpdateType `json:"type"`

	// Revision is the source revision the operation runs on (commit SHA, Flux
	// artifact revision, or Program generation).
	// +optional
	Revision string `json:"revision,omitempty"`

	// ArtifactDigest is the content digest ("sha256:<hex>") of the artifact
	// the runner must fetch and verify.
	// +optional
	ArtifactDigest string `json:"artifactDigest,omitempty"`

	// ProjectDir is the directory inside the artifact that holds the Pulumi
	// project ("" for the artifact's root).
	// +optional
	ProjectDir string `json:"projectDir,omitempty"`

	// DesiredStateKey is the hash of everything this operation was derived
	// from (revision, Stack generation, referenced config, operation). The
	// Stack controller compares it to decide whether work is still needed.
	// +optional
	DesiredStateKey string `json:"desiredStateKey,omitempty"`

	// Attempt numbers the tries for the same desired state, starting at 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Attempt int32 `json:"attempt,omitempty"`

	// Runner is the runner the Update is bound to from its creation: the manager process
	// that created it runs it (the local executor), so no claim is written before it
	// starts, and a short run goes from Pending to its result in one status write
	// (status.phase reads Running only once it has run for 10 s). Another runner that
	// finds it still Pending (its own was in a manager that has since stopped) claims it,
	// and an up then first looks in the backend's history for the run the bound runner
	// may have completed. Empty: the Update goes to whichever runner claims it (the Job
	// executor).
	// +optional
	Runner string `json:"runner,omitempty"`

	// Inputs is what the Stack controller decided this operation on: the Stack's
	// generation and the fingerprint of the ConfigMaps and Secrets it read (their UIDs
	// and resourceVersions, never their content). An up or preview whose Stack or
	// references have changed since fails before the engine runs, so that nothing is
	// deployed under a desired-state key computed from other values; the Stack then
	// decides again with them.
	// +optional
	Inputs *UpdateInputs `json:"inputs,omitempty"`

	// Options tune the operation.
	// +optional
	Options *UpdateOptions `json:"options,omitempty"`
}

// UpdateInputs identifies the inputs an Update was decided on.
type UpdateInputs struct {
	// StackGeneration is the Stack's metadata.generation.
	StackGeneration int64 `json:"stackGeneration"`
	// Fingerprint identifies the referenced ConfigMaps and Secrets as they were read.
	Fingerprint string `json:"fingerprint"`
}

// UpdateOptions tune an engine operation.
type UpdateOptions struct {
	// Refresh refreshes the stack before the operation.
	// +optional
	Refresh bool `json:"refresh,omitempty"`

	// ExpectNoChanges fails the operation if it would change anything.
	// +optional
	ExpectNoChanges bool `json:"expectNoChanges,omitempty"`

	// Targets limits the operation to resources with these URNs.
	// +optional
	Targets []string `json:"targets,omitempty"`

	// TargetDependents includes resources that depend on the targets.
	// +optional
	TargetDependents bool `json:"targetDependents,omitempty"`

	// RunProgram runs the program during refresh and destroy.
	// +optional
	RunProgram bool `json:"runProgram,omitempty"`

	// Replace lists URNs of resources an up or preview replaces even if nothing about
	// them changed.
	// +optional
	// +listType=atomic
	Replace []string `json:"replace,omitempty"`

	// Parallel bounds the resource operations run at once (1: one at a time); 0 leaves
	// the CLI's default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Parallel int32 `json:"parallel,omitempty"`

	// ContinueOnError makes an up or destroy go on with the resources that do not depend
	// on one that failed; the operation still fails.
	// +optional
	ContinueOnError bool `json:"continueOnError,omitempty"`

	// Remove deletes the stack itself from the backend after a successful
	// destroy.
	// +optional
	Remove bool `json:"remove,omitempty"`

	// Message is attached to the operation in the backend's history.
	// +optional
	Message string `json:"message,omitempty"`

	// SavePlan makes a preview save the update plan it computed, in the Secret that
	// status.planSecretName names, for an up to be held to.
	// +optional
	SavePlan bool `json:"savePlan,omitempty"`

	// Plan names the preview Update, in the same namespace, whose saved plan an up is held
	// to: it performs only the changes that preview showed, and fails with reason
	// PlanInvalid at the first it did not.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Plan string `json:"plan,omitempty"`

	// Recover names earlier Updates of the same desired state whose runners were lost
	// before they reported. When the backend's latest history entry is the run of one of
	// them, and it succeeded, an up records that run (status.recovered) instead of
	// applying the same desired state again.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Recover []string `json:"recover,omitempty"`

	// OutputsSecret keeps the outputs in a Secret (status.outputsSecretName) even when none
	// of them is secret: a one-off operation's auto.pulumi.com Update names that Secret, as
	// PKO's does.
	// +optional
	OutputsSecret bool `json:"outputsSecret,omitempty"`
}

// RecoveredRun is an earlier Update's engine run that an up found complete in the
// backend's history, and recorded instead of running again.
type RecoveredRun struct {
	// Update names the earlier Update, whose runner was lost before it reported.
	Update string `json:"update"`
	// Version is the stack version the run wrote, as the backend's history numbers it
	// (DIY backends do not: 0).
	// +optional
	Version int64 `json:"version,omitempty"`
}

// MaxPendingOperations is how many pending operations an Update's status lists.
const MaxPendingOperations = 20

// MaxViolations is how many policy violations (and errors) a status lists.
const MaxViolations = 50

// PolicyResults is what the policies selecting a Stack found in a preview.
type PolicyResults struct {
	// Evaluated names the policies judged ("Policy <namespace>/<name>" or
	// "ClusterPolicy <name>").
	// +optional
	// +listType=atomic
	Evaluated []string `json:"evaluated,omitempty"`
	// Violations are the messages of their deny rules.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Violations []PolicyViolation `json:"violations,omitempty"`
	// Errors are the policies that could not be judged (they do not compile, or their
	// evaluation failed); each counts as a mandatory violation.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Errors []PolicyViolation `json:"errors,omitempty"`
}

// PolicyViolation is one message of one policy.
type PolicyViolation struct {
	// Policy names the policy.
	Policy string `json:"policy"`
	// Enforcement is the policy's enforcement.
	Enforcement PolicyEnforcement `json:"enforcement"`
	// Message is the deny rule's message, or the error.
	Message string `json:"message"`
}

// Blocking reports whether the results stop the change: a mandatory violation, or a
// policy that could not be judged.
func (p *PolicyResults) Blocking() bool {
	if p == nil {
		return false
	}
	if len(p.Errors) > 0 {
		return true
	}
	for _, v := range p.Violations {
		if v.Enforcement == EnforcementMandatory {
			return true
		}
	}
	return false
}

// MaxSteps is how many resource operations an Update's status lists.
const MaxSteps = 200

// UpdateStep is one resource operation that an Update planned (preview) or performed. It
// names properties, never their values.
type UpdateStep struct {
	// Op is the operation: create, update, replace, delete, import, ...
	Op string `json:"op"`
	// URN identifies the resource.
	URN string `json:"urn"`
	// Type is the resource's type token.
	// +optional
	Type string `json:"type,omitempty"`
	// Changed lists the paths of the properties the operation changes.
	// +optional
	// +listType=atomic
	Changed []string `json:"changed,omitempty"`
	// Replacing lists the properties whose change forces a replacement.
	// +optional
	// +listType=atomic
	Replacing []string `json:"replacing,omitempty"`
}

// UpdateStatus is the progress and outcome of an Update, written by the runner
// that executes it (and by the Update controller when a runner is lost).
type UpdateStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase is Pending, Running, Succeeded or Failed.
	// +optional
	Phase UpdatePhase `json:"phase,omitempty"`

	// StartTime is when the runner started the operation.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// EndTime is when the operation finished.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`

	// Runner identifies who executed the operation (e.g. "local/<pod>/<pid>"
	// or "job/<namespace>/<job-name>").
	// +optional
	Runner string `json:"runner,omitempty"`

	// Result is the outcome once finished.
	// +optional
	Result UpdateResult `json:"result,omitempty"`

	// Message is the engine's summary or error. It never contains secret
	// values.
	// +optional
	Message string `json:"message,omitempty"`

	// Queue says where a Pending Update stands in the executor's queue, once it has
	// waited a while; it is removed when the Update starts.
	// +optional
	Queue *UpdateQueue `json:"queue,omitempty"`

	// Changes counts resource operations by kind (create, update, delete,
	// replace, same, ...).
	// +optional
	Changes map[string]int64 `json:"changes,omitempty"`

	// Steps lists the resource operations the Update planned (a preview) or performed,
	// unchanged resources left out: at most MaxSteps (200), StepsOmitted counts the rest.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=200
	Steps []UpdateStep `json:"steps,omitempty"`

	// StepsOmitted counts the steps beyond the first 200, which steps does not list.
	// +optional
	StepsOmitted int32 `json:"stepsOmitted,omitempty"`

	// PlanSecretName names the Secret, in the Update's namespace, holding the update
	// plan a preview with options.savePlan saved.
	// +optional
	PlanSecretName string `json:"planSecretName,omitempty"`

	// Policy is what the policies selecting the Stack found in a preview with
	// options.savePlan.
	// +optional
	Policy *PolicyResults `json:"policy,omitempty"`

	// PendingOperations lists the operations an interrupted update left pending in the
	// stack's state, which this up warned about: "<urn> (interrupted while creating)", at
	// most MaxPendingOperations (20). The up went ahead; a pending create stays in the
	// state, and the resource may exist at the provider, until a person checks and clears
	// or imports it (pulumi refresh --clear-pending-creates or --import-pending-creates).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	PendingOperations []string `json:"pendingOperations,omitempty"`

	// Recovered is set on an up that found the run of a lost earlier Update complete in
	// the backend's history: it did not run the engine, and its changes are that run's.
	// +optional
	Recovered *RecoveredRun `json:"recovered,omitempty"`

	// OutputsSecretName names the Secret, in the Update's namespace, holding the stack
	// outputs after a successful operation when one of them is secret (secret values are
	// only ever there), they are too many for status.outputs, or options.outputsSecret asks
	// for it.
	// +optional
	OutputsSecretName string `json:"outputsSecretName,omitempty"`

	// Outputs are the stack outputs after a successful operation (as JSON) when none of
	// them is secret and their JSON fits in 4 KiB (MaxOutputsInStatus): the result's one status
	// write carries them, and no Secret is written. Empty ({}) when the stack has none;
	// absent when outputsSecretName names them, or they were not recorded.
	// +optional
	Outputs map[string]apiextensionsv1.JSON `json:"outputs"`

	// LogTail is the end of the engine's output, for diagnosis.
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	LogTail string `json:"logTail,omitempty"`

	// Permalink is the backend's URL for the operation, when it has one.
	// +optional
	Permalink string `json:"permalink,omitempty"`

	// Conditions of the Update.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// Finished reports whether the Update has reached a terminal phase.
func (s *UpdateStatus) Finished() bool {
	return s.Phase == UpdatePhaseSucceeded || s.Phase == UpdatePhaseFailed
}

// Update is one engine operation (preview, up, refresh, destroy or drift
// check) on one Stack: the durable record of what ran, on which revision, when,
// where, and with what result.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=stackwright,shortName=upd
// +kubebuilder:printcolumn:name="Stack",type=string,JSONPath=`.spec.stackName`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Result",type=string,JSONPath=`.status.result`
// +kubebuilder:printcolumn:name="Revision",type=string,priority=10,JSONPath=`.spec.revision`
// +kubebuilder:printcolumn:name="Attempt",type=integer,priority=10,JSONPath=`.spec.attempt`
// +kubebuilder:printcolumn:name="Message",type=string,priority=10,JSONPath=`.status.message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Update struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   UpdateSpec   `json:"spec"`
	Status UpdateStatus `json:"status,omitempty"`
}

// UpdateList is a list of Updates.
//
// +kubebuilder:object:root=true
type UpdateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Update `json:"items"`
}
