package crashpoint

// Env arms one point in a chaos build: "<point>" crashes at its first hit, "<point>#<n>" at
// its n-th. Release builds ignore it.
const Env = "STACKWRIGHT_CRASH_AT"

// The named crash points, by where they sit.
const (
	// StackFinalizerAdded: the Stack's finalizer is persisted, nothing else yet.
	StackFinalizerAdded = "stack/finalizer-added"
	// StackIntentRecorded: an Update's intent is in the Stack's status; the Update does not
	// exist yet.
	StackIntentRecorded = "stack/intent-recorded"
	// StackPreviewIntentRecorded: an approval preview's intent is in the Stack's status; the
	// preview Update does not exist yet.
	StackPreviewIntentRecorded = "stack/preview-intent-recorded"
	// StackUpdateCreated: the Update exists; no executor has it yet.
	StackUpdateCreated = "stack/update-created"
	// StackResultObserved: a finished Update's result is folded into the Stack in memory,
	// not yet persisted.
	StackResultObserved = "stack/result-observed"
	// StackOutputsExported: the outputs Secret or ConfigMap is written; the Stack's status
	// does not say so yet.
	StackOutputsExported = "stack/outputs-exported"
	// StackPreviewObserved: an approval preview's verdict is folded in memory, not persisted.
	StackPreviewObserved = "stack/preview-observed"
	// StackUpdatesPruned: old Updates of the Stack were deleted.
	StackUpdatesPruned = "stack/updates-pruned"
	// StackDestroyIntentRecorded: the destroy on deletion is recorded; its Update does not
	// exist yet.
	StackDestroyIntentRecorded = "stack/destroy-intent-recorded"
	// StackDestroySucceeded: the destroy succeeded; the finalizer is still on.
	StackDestroySucceeded = "stack/destroy-succeeded"
	// ExecutorClaimed: an executor took an Update, by claiming it (Running) or, bound to it
	// at its creation, by beginning it (nothing written yet); the engine has not started.
	ExecutorClaimed = "executor/claimed"
	// RunnerArtifactExtracted: the work directory is ready; the engine has not started.
	RunnerArtifactExtracted = "runner/artifact-extracted"
	// EngineCLIStarted: a pulumi process of the run is started.
	EngineCLIStarted = "engine/cli-started"
	// EngineCLIFinished: a pulumi process of the run exited; its result is not read yet.
	EngineCLIFinished = "engine/cli-finished"
	// EngineUpApplied: an up's pulumi process exited having applied the program; nothing
	// of its result (outputs, status) is recorded yet.
	EngineUpApplied = "engine/up-applied"
	// RunnerOutputsWritten: the outputs Secret exists; the Update's status does not say so.
	RunnerOutputsWritten = "runner/outputs-written"
	// RunnerPlanWritten: a preview's plan Secret exists; the Update's status does not say so.
	RunnerPlanWritten = "runner/plan-written"
	// RunnerResultRecorded: the Update's final status is persisted.
	RunnerResultRecorded = "runner/result-recorded"
	// UpdateRunnerLostMarked: the Update controller marked an Update whose runner is gone as
	// failed.
	UpdateRunnerLostMarked = "update/runner-lost-marked"
	// ProgramArtifactStored: a Program's artifact is in the store; its status does not name
	// it yet.
	ProgramArtifactStored = "program/artifact-stored"
	// ArtifactsCollected: the artifact store's garbage collector removed what it found old.
	ArtifactsCollected = "gc/artifacts-collected"
	// LocksHealed: stale locks were removed; the operation has not been tried again yet.
	LocksHealed = "engine/locks-healed"
)

// All lists every point, in the order a Stack's life reaches them.
var All = []string{
	StackFinalizerAdded, ProgramArtifactStored, StackPreviewIntentRecorded, StackIntentRecorded, StackUpdateCreated, ExecutorClaimed,
	RunnerArtifactExtracted, EngineCLIStarted, EngineCLIFinished, EngineUpApplied, RunnerOutputsWritten, RunnerPlanWritten,
	RunnerResultRecorded, StackResultObserved, StackPreviewObserved, StackOutputsExported, StackUpdatesPruned,
	StackDestroyIntentRecorded, StackDestroySucceeded, UpdateRunnerLostMarked, ArtifactsCollected, LocksHealed,
}
