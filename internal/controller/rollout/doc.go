// Package rollout owns the StackRollout controller: it divides the Stacks a rollout selects
// into waves, moves a new revision of their shared source through the waves (releasing at
// most maxParallel Stacks of a wave at a time, baking, running the gate Job, waiting for a
// promotion), and halts on the first failure. It never touches a Stack's spec: the Stack
// controller reads the rollout's status to learn which revision each Stack may deploy
// (open waves get the target; the others keep the revision they have).
package rollout
