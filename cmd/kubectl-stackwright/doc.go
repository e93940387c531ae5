// Command kubectl-stackwright is the `kubectl stackwright` plugin (internal/kubectlplugin):
// put it on PATH and kubectl finds it.
package main
