package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Annotations a person (or `kubectl stackwright rollout`) sets on a StackRollout. Each acts
// once per new value, as Flux's reconcile.fluxcd.io/requestedAt does: any value not acted
// on before (a timestamp, say) is a new request. A request that does not apply to the
// rollout's state (promote while no wave awaits promotion) is recorded as handled and
// announced by an Ignored event, so that it never acts later by surprise.
const (
	// RolloutPromoteAnnotation opens the next wave of a rollout whose wave awaits a
	// person's promotion (spec.gates.approval: Manual).
	RolloutPromoteAnnotation = "stackwright.dev/promote"
	// RolloutAbortAnnotation aborts a progressing or halted rollout: the Stacks of its open
	// waves deploy the stable revision again (a new up of it, not a restore of the state).
	RolloutAbortAnnotation = "stackwright.dev/abort"
	// RolloutResumeAnnotation resumes a halted rollout: the failures that halted it are
	// forgiven, their Stacks are retried, and the wave continues.
	RolloutResumeAnnotation = "stackwright.dev/resume"
	// RolloutPauseAnnotation pauses a rollout until a resume: nothing new starts (no
	// Stack is released, no wave opens, no gate runs, no revision starts), and the Updates
	// already running finish. spec.paused does the same for GitOps.
	RolloutPauseAnnotation = "stackwright.dev/pause"
)

// RolloutLabel is set on the gate Jobs a rollout creates, to its name.
const RolloutLabel = "stackwright.dev/rollout"

// RolloutGateLabel, set to "true" on a CronJob by its author, lets rollouts of its
// namespace run it as a gate (spec.gates.jobFrom). The manager may create Jobs where the
// rollout's author may not; the label is the CronJob author's consent.
const RolloutGateLabel = "stackwright.dev/rollout-gate"

// StackRolloutSpec says which Stacks a new revision of their source (or of their
// template) reaches in which order, and what must hold before the next wave starts.
// +kubebuilder:validation:XValidation:rule="has(self.template) == has(oldSelf.template) && (!has(self.template) || self.template.name == oldSelf.template.name)",message="spec.template is immutable: a rollout of another template (or of sources) is another rollout"
type StackRolloutSpec struct {
	// Selector selects the rollout's Stacks in its namespace. They must share one source
	// (one Program, one git repository and branch, or one Flux source): a revision is
	// what that source offers. A Stack is selected by at most one rollout of source
	// revisions. With template set, it selects among the template's instances' Stacks,
	// and an empty selector selects them all.
	Selector metav1.LabelSelector `json:"selector"`

	// Template makes this a rollout of a StackTemplate's revisions: the rollout selects
	// the Stacks of the template's instances (labelled stackwright.dev/template), and
	// moves each new template revision through the waves, in place of the template's
	// updateStrategy. The instance controller renders a Stack from the revision the
	// rollout allows it; revisions of the Stacks' source are not gated by this rollout (a
	// rollout of source revisions may select the same Stacks). The rollout must be in the
	// template's platform namespace. It cannot change.
	// +optional
	Template *RolloutTemplate `json:"template,omitempty"`

	// Waves divides the selected Stacks into ordered waves.
	Waves RolloutWaves `json:"waves"`

	// MaxParallel bounds how many Stacks of a wave update to the new revision at once: a
	// count, or a percentage of the wave's Stacks ("25%", rounded up, so at least one).
	// 0 (the default) lets the whole wave update at once. spec.waves.pace overrides it per
	// wave.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9][0-9]?)%$')",message="maxParallel is a count (0 or more) or a percentage from 1% to 100%"
	MaxParallel *intstr.IntOrString `json:"maxParallel,omitempty"`

	// BakeTime is how long a wave must stay Ready at the new revision before its gates
	// run and the next wave may start. Default 0. spec.waves.pace overrides it per wave.
	// +optional
	BakeTime *metav1.Duration `json:"bakeTime,omitempty"`

	// Gates must pass after each wave but the last, before the next wave starts.
	// +optional
	Gates RolloutGates `json:"gates,omitempty"`

	// AutoAbort, when set, aborts a rollout as soon as it halts, without waiting for a
	// person, up to a number of automatic aborts in a row. The Stacks that ran the aborted
	// revision return to the stable one paced by their wave's maxParallel.
	// +optional
	AutoAbort *RolloutAutoAbort `json:"autoAbort,omitempty"`

	// NewerRevision says what a newer revision offered while the target is rolled out
	// does. Queue (the default): it waits until the target has reached every wave, then
	// starts. Restart: the target goes no further (the Stacks of the current wave already
	// released finish their Updates, no more are released) and the newest revision starts
	// from the first wave, so that a revision nobody wants any more reaches no later wave.
	// +optional
	// +kubebuilder:validation:Enum=Queue;Restart
	NewerRevision RolloutNewerRevision `json:"newerRevision,omitempty"`

	// Paused, while true, pauses the rollout as the stackwright.dev/pause annotation does:
	// nothing new starts, and the Updates already running finish. It is the pause a GitOps
	// repository holds; a resume request does not lift it. Default false.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// RolloutTemplate names the StackTemplate whose revisions a rollout rolls out.
type RolloutTemplate struct {
	// Name of the StackTemplate.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RolloutWaves divides the selected Stacks into waves: exactly one field is set.
// +kubebuilder:validation:XValidation:rule="(has(self.byLabel) ? 1 : 0) + (has(self.steps) ? 1 : 0) == 1",message="set exactly one of byLabel and steps"
type RolloutWaves struct {
	// ByLabel makes one wave per value of a label, in the order the values are listed.
	// Selected Stacks without the label, or with a value not listed, form a last wave.
	// +optional
	ByLabel *RolloutWavesByLabel `json:"byLabel,omitempty"`

	// Steps makes one wave per step. Each step's stacks is a cumulative count ("1") or
	// percentage ("30%", rounded up) of the selected Stacks, in the order of their names;
	// Stacks beyond the last step form a last wave.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	Steps []RolloutStep `json:"steps,omitempty"`

	// Pace overrides spec.maxParallel and spec.bakeTime for the waves it names. An entry
	// that names no wave of a rollout changes nothing.
	// +optional
	// +listType=map
	// +listMapKey=wave
	// +kubebuilder:validation:MaxItems=21
	Pace []RolloutWavePace `json:"pace,omitempty"`
}

// RolloutWavePace is the pace of one wave, in place of the rollout's.
type RolloutWavePace struct {
	// Wave names the wave: a byLabel value, "(other)", or "step-<n>".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Wave string `json:"wave"`

	// MaxParallel bounds how many of the wave's Stacks update at once: a count or a
	// percentage of the wave's Stacks (rounded up). 0 (or "0%") holds the wave: none of its
	// Stacks is released (those released already keep the target) until it is raised.
	// Unset, spec.maxParallel applies.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[0-9]{1,2})%$')",message="maxParallel is a count (0 or more) or a percentage from 0% to 100%"
	MaxParallel *intstr.IntOrString `json:"maxParallel,omitempty"`

	// BakeTime of the wave; unset, spec.bakeTime applies.
	// +optional
	BakeTime *metav1.Duration `json:"bakeTime,omitempty"`
}

// RolloutWavesByLabel orders waves by a label's values.
type RolloutWavesByLabel struct {
	// Key of the label (e.g. ring).
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`

	// Values of the label, one wave each, in rollout order (e.g. "0", "1", "2").
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Values []string `json:"values"`
}

// RolloutStep is one wave of a step rollout.
// +kubebuilder:validation:XValidation:rule="type(self.stacks) == int ? self.stacks >= 0 : self.stacks.matches('^(100|[0-9]{1,2})%$')",message="stacks is a count (0 or more) or a percentage from 0% to 100%"
type RolloutStep struct {
	// Stacks is how many of the selected Stacks have the new revision once this step is
	// done: a count ("2") or a percentage ("25%").
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=8
	Stacks intstr.IntOrString `json:"stacks"`
}

// RolloutGates are checked between waves, in this order.
type RolloutGates struct {
	// JobFrom names a CronJob in the rollout's namespace whose jobTemplate is run once per
	// wave, as `kubectl create job --from=cronjob/<name>` runs it: the gate passes when the
	// Job completes and fails when the Job fails. The Job's containers get the rollout's
	// name, the wave, the revision and the wave's Stacks' outputs (status.outputs, where
	// secret values are masked) in their environment. The CronJob must be labelled
	// stackwright.dev/rollout-gate: "true" by its author; give it suspend: true so that
	// it never runs on its own schedule.
	// +optional
	JobFrom *corev1.LocalObjectReference `json:"jobFrom,omitempty"`

	// Preview judges, before a wave's Stacks are released, each one's preview of the
	// target: the Stack controller previews the target on each Stack of the wave (as it
	// previews a change the Policies that select the Stack judge, whose advisory
	// violations halt the rollout too), and the wave starts only once every preview
	// passes. A preview that fails halts the rollout, naming the Stacks and the steps at
	// fault. For a rollout of template revisions, each instance's Stack of spec.stack is
	// rendered from the target for its preview only, and keeps its revision until its wave
	// opens.
	// +optional
	Preview *RolloutPreviewGate `json:"preview,omitempty"`

	// Metrics are gates on a Prometheus the platform names: during each wave's bake window
	// (the last wave's too), each query is sampled every interval; the wave passes its
	// bake once the bake time is over and each gate has its consecutive successes, and a
	// gate's consecutive failures halt the rollout (MetricGateFailed).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=5
	Metrics []RolloutMetricGate `json:"metrics,omitempty"`

	// Approval Manual makes each wave wait, once its other gates passed, for a person to
	// promote it (the stackwright.dev/promote annotation, or
	// `kubectl stackwright rollout promote`). Default Auto.
	// +optional
	// +kubebuilder:validation:Enum=Auto;Manual
	Approval RolloutApproval `json:"approval,omitempty"`
}

// RolloutAutoAbort aborts halted rollouts automatically.
type RolloutAutoAbort struct {
	// Limit is how many automatic aborts may follow one another without a revision
	// reaching every wave in between: the halt after them waits for a person, as without
	// autoAbort. Default 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Limit int32 `json:"limit,omitempty"`
}

// RolloutNewerRevision says what a revision offered during the rollout of another does.
type RolloutNewerRevision string

const (
	// RolloutNewerRevisionQueue lets the target reach every wave; the newest revision
	// offered meanwhile starts after it (those in between are skipped).
	RolloutNewerRevisionQueue RolloutNewerRevision = "Queue"
	// RolloutNewerRevisionRestart stops the target at its current wave once its released
	// Stacks finish, and starts the newest revision from the first wave.
	RolloutNewerRevisionRestart RolloutNewerRevision = "Restart"
)

// RolloutPreviewGate says what a Stack's preview of the target may plan. Unset rules
// allow anything: with none set, only the Policies selecting the Stacks judge the preview.
type RolloutPreviewGate struct {
	// NoDeletes fails a preview that deletes a resource.
	// +optional
	NoDeletes bool `json:"noDeletes,omitempty"`
	// NoReplaces fails a preview that replaces a resource.
	// +optional
	NoReplaces bool `json:"noReplaces,omitempty"`
	// MaxChanges fails a preview that changes (creates, updates, replaces, deletes, ...)
	// more resources than this.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxChanges *int32 `json:"maxChanges,omitempty"`
}

// RolloutMetricGate is a PromQL query a wave must satisfy while it bakes.
type RolloutMetricGate struct {
	// Name of the gate, as the wave's status and the rollout's messages name it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Prometheus is the server queried.
	Prometheus RolloutPrometheus `json:"prometheus"`

	// Query is a PromQL instant query, a Go template of {{.Namespace}}, {{.Rollout}},
	// {{.Wave}}, {{.Revision}} and {{.Stacks}} (the wave's Stacks as a regular
	// expression, "a|b", for =~).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query"`

	// SuccessCondition every value of a sample must meet for it to succeed: an operator
	// (<, <=, >, >=, ==, !=) and a number, e.g. "< 0.05". A sample with no value succeeds
	// not, nor fails.
	// +kubebuilder:validation:Pattern=`^\s*(<=|>=|==|!=|<|>)\s*[-+]?[0-9.]+([eE][-+]?[0-9]+)?\s*$`
	SuccessCondition string `json:"successCondition"`

	// FailureCondition any value of a sample meeting it fails the sample. Default: a
	// sample that does not succeed fails.
	// +optional
	// +kubebuilder:validation:Pattern=`^\s*(<=|>=|==|!=|<|>)\s*[-+]?[0-9.]+([eE][-+]?[0-9]+)?\s*$`
	FailureCondition string `json:"failureCondition,omitempty"`

	// Interval between samples. Default 30s.
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// Successes is how many consecutive samples must succeed. Default 3.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Successes int32 `json:"successes,omitempty"`

	// Failures is how many consecutive samples must fail to halt the rollout. Default 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Failures int32 `json:"failures,omitempty"`
}

// RolloutPrometheus names a Prometheus server and how to authenticate to it.
type RolloutPrometheus struct {
	// URL of the server's HTTP API root, e.g. http://prometheus.monitoring:9090. The
	// manager queries it only when it falls under a URL prefix its --metric-gate-urls
	// allows (none by default); otherwise the rollout stalls (MetricGateURLNotAllowed) and
	// no request is sent.
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`

	// AuthSecretRef names a Secret in the rollout's namespace with the key token (a
	// bearer token), or the keys username and password (basic authentication).
	// +optional
	AuthSecretRef *corev1.LocalObjectReference `json:"authSecretRef,omitempty"`
}

// RolloutMetricStatus is where a metric gate stands for a wave.
type RolloutMetricStatus struct {
	// Name of the gate.
	Name string `json:"name"`
	// Value of the last sample: the values of its series, or why there is none.
	// +optional
	Value string `json:"value,omitempty"`
	// SampleTime is when the last sample was taken.
	// +optional
	SampleTime *metav1.Time `json:"sampleTime,omitempty"`
	// Successes and Failures count the consecutive samples that succeeded, or failed,
	// up to the last one.
	// +optional
	Successes int32 `json:"successes,omitempty"`
	// +optional
	Failures int32 `json:"failures,omitempty"`
}

// RolloutApproval says whether waves wait for a person.
type RolloutApproval string

const (
	// RolloutApprovalAuto opens the next wave as soon as the gates pass.
	RolloutApprovalAuto RolloutApproval = "Auto"
	// RolloutApprovalManual waits for a promotion after each wave but the last.
	RolloutApprovalManual RolloutApproval = "Manual"
)

// RolloutPhase is where a rollout stands.
type RolloutPhase string

const (
	// RolloutIdle: every Stack may stay at the stable revision; no new one is offered.
	RolloutIdle RolloutPhase = "Idle"
	// RolloutProgressing: a new revision is moving through the waves.
	RolloutProgressing RolloutPhase = "Progressing"
	// RolloutHalted: a wave failed; later waves keep the stable revision until a person
	// resumes or aborts.
	RolloutHalted RolloutPhase = "Halted"
	// RolloutAborted: the target revision was abandoned; every Stack deploys the stable
	// revision, and the next new revision starts a new rollout.
	RolloutAborted RolloutPhase = "Aborted"
)

// WaveState is where one wave stands.
type WaveState string

const (
	WavePending           WaveState = "Pending"
	WavePreviewing        WaveState = "Previewing"
	WaveUpdating          WaveState = "Updating"
	WaveBaking            WaveState = "Baking"
	WaveGating            WaveState = "Gating"
	WaveAwaitingPromotion WaveState = "AwaitingPromotion"
	WaveDone              WaveState = "Done"
	WaveFailed            WaveState = "Failed"
)

// RolloutRevision is a revision of the rollout's source and the artifact it resolved to,
// or a revision of its template and what that revision renders.
type RolloutRevision struct {
	// Revision as the source reports it (a commit, a Flux artifact revision, a Program
	// generation), or the template's revision number (as the Stacks'
	// stackwright.dev/template-revision label has it).
	Revision string `json:"revision"`
	// Digest of the artifact, "sha256:<hex>"; of a template revision, of what it renders
	// (its stack, config and outputs).
	Digest string `json:"digest"`
}

// RolloutWaveStatus is one wave of the current rollout.
type RolloutWaveStatus struct {
	// Name of the wave: the label value, or step-<n>.
	Name string `json:"name"`
	// Stacks of the wave, by name, frozen when the rollout of the target started: Stacks
	// selected later keep their revision until the rollout ends.
	// +listType=atomic
	Stacks []string `json:"stacks,omitempty"`
	// Released counts the Stacks of the wave, in the order listed, that may update to the
	// target (all once the wave is done; at most maxParallel unfinished at a time).
	// +optional
	Released int32 `json:"released,omitempty"`
	// Updated counts the Stacks of the wave Ready at the target revision.
	// +optional
	Updated int32 `json:"updated,omitempty"`
	// State of the wave.
	State WaveState `json:"state"`
	// ReadyTime is when every Stack of the wave was first Ready at the target; its bake
	// time counts from it.
	// +optional
	ReadyTime *metav1.Time `json:"readyTime,omitempty"`
	// GateJob names the gate Job run for the wave.
	// +optional
	GateJob string `json:"gateJob,omitempty"`
	// Metrics are the wave's metric gates' samples.
	// +optional
	// +listType=map
	// +listMapKey=name
	Metrics []RolloutMetricStatus `json:"metrics,omitempty"`
	// Returned counts the wave's released Stacks, in the order listed, that an automatic
	// abort lets return to the stable revision (at most maxParallel unfinished at a time).
	// +optional
	Returned int32 `json:"returned,omitempty"`
}

// StackRolloutStatus is where the rollout stands.
type StackRolloutStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready when no revision waits to be rolled out (Idle, or Aborted and
	// rolled back); Reconciling while a revision moves through the waves (reason
	// AwaitingPromotion when a person must promote); Halted and Stalled when a wave
	// failed, naming the Stacks or the gate at fault.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Phase of the rollout.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`

	// Stable is the revision Stacks return to on abort, and the one a Stack that never
	// deployed gets while its wave is closed: the last target that reached every wave.
	// +optional
	Stable *RolloutRevision `json:"stable,omitempty"`

	// Target is the revision being rolled out.
	// +optional
	Target *RolloutRevision `json:"target,omitempty"`

	// Aborted is the last revision aborted: it is not rolled out again.
	// +optional
	Aborted *RolloutRevision `json:"aborted,omitempty"`

	// Wave is the index of the current wave in waves.
	// +optional
	Wave int32 `json:"wave,omitempty"`

	// WaveName is the current wave's name.
	// +optional
	WaveName string `json:"waveName,omitempty"`

	// Waves of the current (or last) rollout.
	// +optional
	// +listType=atomic
	Waves []RolloutWaveStatus `json:"waves,omitempty"`

	// Stacks counts the Stacks of the waves; Updated those Ready at the target.
	// +optional
	Stacks int32 `json:"stacks,omitempty"`
	// +optional
	Updated int32 `json:"updated,omitempty"`

	// FailedStacks names the Stacks that halted the rollout.
	// +optional
	// +listType=atomic
	FailedStacks []string `json:"failedStacks,omitempty"`

	// ResumeTime is when the rollout was last resumed: failures that finished before it
	// no longer halt it.
	// +optional
	ResumeTime *metav1.Time `json:"resumeTime,omitempty"`

	// PacedAbort is true when the last abort was automatic: the Stacks return to the
	// stable revision paced by their wave (waves[].returned), not all at once.
	// +optional
	PacedAbort bool `json:"pacedAbort,omitempty"`

	// AutomaticAborts counts the automatic aborts since a revision last reached every
	// wave (spec.autoAbort.limit bounds it).
	// +optional
	AutomaticAborts int32 `json:"automaticAborts,omitempty"`

	// PauseTime is when a pause request (the stackwright.dev/pause annotation) paused the
	// rollout; a resume request clears it. spec.paused pauses the rollout too.
	// +optional
	PauseTime *metav1.Time `json:"pauseTime,omitempty"`

	// StartTime is when the rollout of the target started; CompletionTime when the last
	// target reached every wave.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// The values of the promote, abort, resume and pause annotations already acted on.
	// +optional
	HandledPromote string `json:"handledPromote,omitempty"`
	// +optional
	HandledAbort string `json:"handledAbort,omitempty"`
	// +optional
	HandledResume string `json:"handledResume,omitempty"`
	// +optional
	HandledPause string `json:"handledPause,omitempty"`
}

// StackRollout moves a new revision of a shared source through its Stacks in waves,
// behind gates, and halts on the first bad wave.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=stackwright
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Wave",type=string,JSONPath=`.status.waveName`
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.updated`
// +kubebuilder:printcolumn:name="Stacks",type=integer,JSONPath=`.status.stacks`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.status.target.revision`
// +kubebuilder:printcolumn:name="Stable",type=string,priority=10,JSONPath=`.status.stable.revision`
// +kubebuilder:printcolumn:name="Halted",type=string,JSONPath=`.status.conditions[?(@.type=="Halted")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type StackRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StackRolloutSpec   `json:"spec,omitempty"`
	Status StackRolloutStatus `json:"status,omitempty"`
}

// StackRolloutList is a list of StackRollouts.
//
// +kubebuilder:object:root=true
type StackRolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StackRollout `json:"items"`
}
