// Package conditions holds the status condition setters every controller uses, so that
// Stacks, Programs and Updates speak one kstatus dialect: Reconciling=True and Ready=False
// share a reason while work is under way, Stalled=True and Ready=False share one when a
// human must act, Ready=True clears both. The setters are pure: they change the object in
// memory and the controller's deferred patch persists it.
package conditions
