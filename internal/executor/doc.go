// Package executor defines where Updates run: the Executor the Update controller submits
// every Pending Update to and asks about every Running one (Check gives a Verdict on its
// runner), and the Detacher that runs the Updates never written to the API server (the
// destroys of Stacks in terminating namespaces). Each implementation lives in a
// subpackage: local runs Updates as engine processes of the manager itself; job runs each
// Update in a runner Pod of its own, a Job in the Stack's namespace (a detached one in the
// manager's). Both are Detachers, and both take their Updates from a Queue, which shares
// their slots out fairly among namespaces. Executors import no controller: they start and
// stop work, and the Update controller records what their verdicts say.
package executor
