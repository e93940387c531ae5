// Package job runs each Update in a runner Pod of its own: a Job in the Stack's namespace,
// as the Stack's ServiceAccount, with its workspaceTemplate and identity tokens applied. It
// owns both ends: in the manager, the Executor that starts the Jobs within their budgets
// (the namespaces taking turns, executor.Queue), declares lost the runners that end
// without a result and fails those whose Pod never starts, and the TLS runner API where
// runners, authenticated by a projected token, fetch their artifact and report back; in
// the Pod, the PodRunner that runs the engine.
package job
