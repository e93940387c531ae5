// Package job runs each Update in a runner Pod of its own: a Job in the Stack's namespace,
// as the Stack's ServiceAccount, with its workspaceTemplate, identity tokens and plugin
// bundles (image volumes the engine finds its providers in) applied;
// or, for the destroy of a Stack whose namespace is being deleted, a Job in the manager's
// namespace as a ServiceAccount without rights (detached Updates). It owns both ends: in
// the manager, the Executor that starts the Jobs within their budgets (the namespaces
// taking turns, executor.Queue), judges its runners when the Update controller asks
// (Check: lost, never started, or alive) and stops those that never started, and the TLS
// runner API where runners, authenticated by a projected token, fetch their artifact and
// report back; in the Pod, the PodRunner that runs the engine.
package job
