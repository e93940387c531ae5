// Package gitwebhook owns the git push webhook: the HTTP endpoint a git host (GitHub,
// Gitea, GitLab, or anything that signs a small JSON body the way Flux's generic-hmac
// Receiver does) calls after a push, so that the Stacks tracking the pushed branch list
// their repository's refs at once instead of at their next poll; and after a pull request
// changes, so that the StackSets following that repository's pull requests list them at
// once.
//
// Each namespace opts in with its own token, in its Secret SecretName; a notification
// reaches only that namespace's Stacks. It only brings their next listing forward: what gets
// deployed is still the commit the listing finds, never one the notification names, so a
// forged or replayed notification can cost ref listings but cannot choose a revision.
package gitwebhook
