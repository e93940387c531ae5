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
	// ReasonMissingPlugin: the program needs a plugin (a provider, a language host) that
	// its runner does not have; the message names it and how to provide it. Plugins are
	// never downloaded at run time, so the Stack stalls at once, without retrying, until
	// its spec, references or source change or the reconcile-request annotation is set.
	ReasonMissingPlugin = "MissingPlugin"
	// ReasonBackendUnsupported: the Stack asks for something its backend does not offer
	// (Pulumi ESC environments, which only Pulumi Cloud serves, on a self-managed backend);
	// the message quotes the CLI. Every run would fail the same way, so the Stack stalls
	// at once, without retrying, until its spec or references change or the
	// reconcile-request annotation is set.
	ReasonBackendUnsupported = "BackendUnsupported"
	// ReasonCancelled: the operation was interrupted (manager shutdown); retried.
	ReasonCancelled = "Cancelled"
	// ReasonPlanInvalid: an up held to an approved plan met a change the plan does not
	// allow (the program, its config or the resources moved since the preview). The
	// approval is void; a new preview is made.
	ReasonPlanInvalid = "PlanInvalid"
	// ReasonRunnerLost: the runner disappeared while the Update was running (the manager
	// restarted); retried.
	ReasonRunnerLost = "RunnerLost"
	// ReasonEvicted: the runner Pod was evicted by its node (its ephemeral storage past
	// its limit, or the node short of memory or disk) before it reported; the message
	// quotes the kubelet, which names the limit. Or the cluster disrupted it (a drain's
	// eviction through the API, a preemption) and the runner cancelled its run; the
	// message names the disruption. Handled as RunnerLost: the next run looks for this one
	// in the backend's history, and the Stack retries.
	ReasonEvicted = "Evicted"
	// ReasonOOMKilled: the runner ran out of memory. Either its container was killed by
	// the kernel's OOM killer (its Pod's status says OOMKilled) before it reported, and the
	// manager records it, the message naming the container's memory limit; or a process
	// of the runner (the provider plugin or language host that allocated the most) was
	// killed, the engine failed, and the runner reported so, having seen its memory
	// cgroup's OOM kill counter rise during the run (the message names the limit). A
	// retry under the same limit most likely runs out again, so it counts toward stalling
	// like PermanentFailure: retried with backoff, Stalled after --stall-after-failures
	// in a row, until the spec changes (raise the runner's memory limit in
	// spec.workspaceTemplate). Like RunnerLost, the next up first looks for the run in the
	// backend's history, since a runner killed before it reported may have completed it.
	ReasonOOMKilled = "OOMKilled"
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

// Reasons of a StackTemplate's conditions.
const (
	// ReasonServing (Ready=True): the kind's CustomResourceDefinition is established and
	// its instances are reconciled.
	ReasonServing = "Serving"
	// ReasonEstablishing (Reconciling=True): the CustomResourceDefinition is written and
	// the API server has not established it yet.
	ReasonEstablishing = "Establishing"
	// ReasonAPIGroupNotAllowed (Stalled=True): the install does not let the manager serve
	// the template's API group (--template-api-groups).
	ReasonAPIGroupNotAllowed = "APIGroupNotAllowed"
	// ReasonDefinitionConflict (Stalled=True): a CustomResourceDefinition of that name
	// exists and Stackwright did not create it for this template: it is never taken over.
	ReasonDefinitionConflict = "DefinitionConflict"
	// ReasonTemplateInvalid (Stalled=True): the template cannot be served as written: its
	// stack is not a Stack's spec, or the API server refused the CustomResourceDefinition
	// built from it (the message says why).
	ReasonTemplateInvalid = "TemplateInvalid"
	// ReasonBreakingChange (Stalled=True): the template's schemas would not read instances
	// that are stored, or that an earlier version wrote (a property removed, a type changed,
	// a new required property without a default, an enum narrowed, ...), or it drops a
	// version instances are still stored in. The message names each change; the
	// definition keeps serving what it served.
	ReasonBreakingChange = "BreakingChange"
	// ReasonConversionUnavailable (Stalled=True): a version renames parameters, which the
	// API server can convert only through the manager's conversion webhook, and this
	// manager serves none (--conversion-webhook-bind-address). The definition keeps
	// serving what it served.
	ReasonConversionUnavailable = "ConversionUnavailable"
	// ReasonInstancesRemain (Reconciling=True, while the template is being deleted): the
	// template waits until its last instance is gone (each destroys its stack first),
	// then removes its CustomResourceDefinition.
	ReasonInstancesRemain = "InstancesRemain"
	// ReasonObjectKindNotAllowed (Stalled=True): spec.objects lists an object of a kind
	// the install does not let templates make (--template-object-kinds).
	ReasonObjectKindNotAllowed = "ObjectKindNotAllowed"
)

// Reasons of an instance's conditions (an object of a kind a StackTemplate defines). The
// instance also mirrors its Stack's own reasons (api/v1's Ready and Reconciling reasons),
// and is Stalled with api/v1's RolloutConflict when more than one StackRollout of the
// template's revisions selects its Stack.
const (
	// ReasonNamespaceNotAllowed (Stalled=True): the template's namespaceSelector does not
	// select the instance's namespace; no Stack exists for it.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	// ReasonTemplateNotReady (Reconciling=True): the template is not served at the moment
	// (Stalled, or being deleted); the instance's Stack stays as it is.
	ReasonTemplateNotReady = "TemplateNotReady"
	// ReasonParametersInvalid (Stalled=True): a parameter a secret config key maps from is
	// not a string, number or boolean.
	ReasonParametersInvalid = "ParametersInvalid"
	// ReasonStackConflict (Stalled=True): the platform namespace holds a Stack of the
	// instance's name that is not the instance's; it is never taken over.
	ReasonStackConflict = "StackConflict"
	// ReasonOutputsConflict (Stalled=True): the Secret or ConfigMap the instance names for
	// its outputs exists and is not the instance's; it is never taken over.
	ReasonOutputsConflict = "OutputsConflict"
	// ReasonDestroying (Reconciling=True): the instance is being deleted and waits for
	// its Stack to be destroyed (or kept, as the template's destroyOnFinalize says).
	ReasonDestroying = "Destroying"
	// ReasonAwaitingStatusFields (Reconciling=True): the instance's Stack is Ready, but a
	// status field the template's readyWhen names is not set yet; the message names each
	// and why.
	ReasonAwaitingStatusFields = "AwaitingStatusFields"
	// ReasonAwaitingDependencies (Reconciling=True): a Stack of a composed template's
	// instance waits for the Stacks it depends on to be Ready and publish their outputs,
	// or its objects wait for the outputs they read; the message names which waits for
	// what.
	ReasonAwaitingDependencies = "AwaitingDependencies"
	// ReasonObjectConflict (Stalled=True): an object the template's spec.objects makes
	// in the instance's namespace exists and is not the instance's; it is never taken
	// over.
	ReasonObjectConflict = "ObjectConflict"
	// ReasonObjectInvalid (Stalled=True): an object of the template's spec.objects
	// cannot be made: a value substituted into it is not a string, number or boolean, its
	// kind is not allowed or not namespaced, or the API server refuses it. The message
	// names the object and why.
	ReasonObjectInvalid = "ObjectInvalid"
)

// Reasons of a StackSet's conditions.
const (
	// ReasonStacksReady (Ready=True): every element has its Stack, and each is Ready.
	ReasonStacksReady = "StacksReady"
	// ReasonStacksProgressing (Reconciling=True): some of the set's Stacks are not Ready
	// yet; the message counts them.
	ReasonStacksProgressing = "StacksProgressing"
	// ReasonRemovalsHeld (Stalled=True): more elements disappeared at once than
	// spec.maxRemovals allows; nothing is removed until they come back, the bound is
	// raised or the set changes.
	ReasonRemovalsHeld = "RemovalsHeld"
	// ReasonTooManyElements (Stalled=True): the generator yields more elements than the
	// manager lets one StackSet have (--max-stackset-elements); nothing is created or
	// removed until its filters, the repository or the cap change.
	ReasonTooManyElements = "TooManyElements"
	// ReasonForgeUnavailable (Reconciling=True): the forge of a pullRequests generator
	// could not be asked now (its rate limit, its own failure, the network); it is asked
	// again at the interval, and nothing is removed meanwhile.
	ReasonForgeUnavailable = "ForgeUnavailable"
	// ReasonForgeRefused (Stalled=True): the forge refused the set's token or does not
	// know its repository, or the token's Secret cannot be read: a person must act.
	ReasonForgeRefused = "ForgeRefused"
)

// ConditionHalted is True on a StackRollout whose wave failed: its reason says how
// (UpdateFailed, StackStalled, PolicyWarning, GateFailed) and its message names the Stacks
// or the gate Job at fault. Later waves keep the stable revision until a person resumes or
// aborts the rollout.
const ConditionHalted = "Halted"

// ConditionPaused is True on a paused StackRollout: its reason says who paused it
// (PauseRequested: the stackwright.dev/pause annotation; SpecPaused: spec.paused). Nothing
// new starts until it is resumed; the Updates already running finish.
const ConditionPaused = "Paused"

// Reasons of a StackRollout's conditions.
const (
	// ReasonPauseRequested (Paused=True): a pause request paused the rollout; a resume
	// request lifts it.
	ReasonPauseRequested = "PauseRequested"
	// ReasonSpecPaused (Paused=True): spec.paused is true; setting it false lifts it.
	ReasonSpecPaused = "SpecPaused"
	// ReasonRolloutPaused (Reconciling=True): a revision is being rolled out, or waits to
	// start, but the rollout is paused; the message says where it stopped.
	ReasonRolloutPaused = "Paused"
	// ReasonRolledOut (Ready=True): every wave has the stable revision; no newer one is
	// offered.
	ReasonRolledOut = "RolledOut"
	// ReasonRolloutAborted (Ready=True once rolled back): the target was aborted and every
	// Stack has the stable revision again; a newer revision starts a new rollout.
	ReasonRolloutAborted = "Aborted"
	// ReasonWaveUpdating (Reconciling=True): the current wave's Stacks are updating.
	ReasonWaveUpdating = "WaveUpdating"
	// ReasonWaveHeld (Reconciling=True): the current wave's maxParallel is 0
	// (spec.waves.pace): none of its Stacks is released until it is raised.
	ReasonWaveHeld = "WaveHeld"
	// ReasonSuperseding (Reconciling=True): a newer revision supersedes the target
	// (spec.newerRevision: Restart); the released Stacks of the current wave finish, then
	// the newer one starts from the first wave.
	ReasonSuperseding = "Superseding"
	// ReasonWavePreviewing (Reconciling=True): the current wave's Stacks preview the target
	// for spec.gates.preview before any is released.
	ReasonWavePreviewing = "WavePreviewing"
	// ReasonWaveSampling (Reconciling=True): the current wave baked, and waits for its
	// metric gates' consecutive successes.
	ReasonWaveSampling = "WaveSampling"
	// ReasonWaveBaking (Reconciling=True): the current wave is Ready and bakes.
	ReasonWaveBaking = "WaveBaking"
	// ReasonWaveGating (Reconciling=True): the gate Job of the current wave runs.
	ReasonWaveGating = "WaveGating"
	// ReasonAwaitingPromotion (Reconciling=True): the current wave passed its gates and
	// waits for a person to promote it.
	ReasonAwaitingPromotion = "AwaitingPromotion"
	// ReasonRollingBack (Reconciling=True): after an abort, Stacks of the opened waves are
	// deploying the stable revision again.
	ReasonRollingBack = "RollingBack"
	// ReasonConverging (Reconciling=True): between rollouts, Stacks that are not at the
	// stable revision (selected during a rollout, or left behind) are deploying it.
	ReasonConverging = "Converging"
	// ReasonRolloutWaiting (Reconciling=True): no Stack has reported the revision its
	// source offers yet.
	ReasonRolloutWaiting = "WaitingForStacks"
	// ReasonStackUpdateFailed (Halted=True): an update to the target failed.
	ReasonStackUpdateFailed = "UpdateFailed"
	// ReasonStackStalled (Halted=True): a Stack of an open wave is Stalled.
	ReasonStackStalled = "StackStalled"
	// ReasonPolicyWarning (Halted=True): a Stack's preview of the target drew an advisory
	// policy violation.
	ReasonPolicyWarning = "PolicyWarning"
	// ReasonPreviewGateFailed (Halted=True): a Stack's preview of the target planned what
	// spec.gates.preview forbids; the message names the Stacks and steps.
	ReasonPreviewGateFailed = "PreviewGateFailed"
	// ReasonMetricGateFailed (Halted=True): a metric gate's samples failed while the wave
	// baked, or its query could not be made; the message names the gate and its last value.
	ReasonMetricGateFailed = "MetricGateFailed"
	// ReasonGateFailed (Halted=True): the gate Job failed, or its CronJob is missing.
	ReasonGateFailed = "GateFailed"
	// ReasonMetricGateURLNotAllowed (Stalled=True): a metric gate names a Prometheus URL
	// outside the prefixes the manager's --metric-gate-urls allows (empty, the default: none),
	// so the manager sends it no request; the message names the gates, their URLs and the
	// flag. Nothing more starts (no revision, wave or Stack) until the spec or the
	// allow-list changes; the rollout then goes on where it was.
	ReasonMetricGateURLNotAllowed = "MetricGateURLNotAllowed"
	// ReasonMixedSources (Stalled=True): the selected Stacks do not share one source, so
	// no revision is common to them.
	ReasonMixedSources = "MixedSources"
)
