// Package rollout owns the StackRollout controller: it divides the Stacks a rollout selects
// into waves, moves a new revision of their shared source through the waves (releasing at
// most maxParallel Stacks of a wave at a time, the rollout's or the wave's own in
// spec.waves.pace, baking, running the gate Job, waiting for a
// promotion, restarting from the first wave with a newer revision when spec.newerRevision
// is Restart), halts on the first failure, and acts on the abort, resume, promote and pause
// requests a person annotates the rollout with (a paused rollout, by a request or by
// spec.paused, starts nothing new but goes on watching what runs), and, with spec.autoAbort,
// aborts a halted target itself, its Stacks returning paced by their wave. It writes the
// rollouts' status, the gate
// Jobs (started from a CronJob its author labelled as a gate), and the reconcile request a
// resume sets on the failed Stacks. It never touches a Stack's spec: the Stack controller
// reports in a Stack's status the revision its source offers, and reads the rollout's
// status to learn which revision the Stack may deploy (open waves get the target; the
// others keep the revision they have). A rollout with spec.template moves a StackTemplate's
// revisions instead, through its instances' Stacks (template.go): it learns of a new one
// from the template, and the instance controller, reading the same status, renders each
// Stack from the revision the rollout allows.
//
// The controller has the Stack controller's shape: Reconcile runs the phases of phases.go
// in order over a scope (scope.go) that holds what the reconcile learned, with one reading
// of the clock; only the pure setters of status.go set the rollout's conditions; events
// announce transitions and are emitted once the status that records them is written
// (kit.Events). plan.go holds the pure planning and judging (waves, verdicts, the
// revisions the Stacks offer), gate.go the gate Jobs, template.go what differs for template
// revisions, preview.go the preview gate, metrics.go the metric gates (PromQL samples taken
// while a wave bakes).
package rollout
