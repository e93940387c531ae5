// Package kubectlplugin is `kubectl stackwright`: everyday commands over Stacks and their
// Updates (list them with their state, show a Stack's history, an Update's engine log, a
// Stack's outputs, the tree from a template instance or Stack down to its runner Pods;
// retry, suspend and resume a Stack) and over StackRollouts (follow one; promote, abort or
// resume it), for people who live in kubectl. It talks to the API server only, with the
// user's kubeconfig and rights; it never reads Secrets, so secret outputs show as
// "[secret]", as in the Stack's status. Its `ui` command, the web console, is
// internal/console, which builds on this package (cmd/kubectl-stackwright adds it).
package kubectlplugin
