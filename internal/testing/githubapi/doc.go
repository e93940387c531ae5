// Package githubapi is a fake of the one GitHub REST endpoint a GitHub App's git client
// needs: POST /app/installations/{id}/access_tokens. It checks the app's JWT (RS256,
// signed with the app's key, iss the app ID, not expired) the way GitHub does, issues
// short-lived installation tokens on its own clock, and tells a git server which tokens
// are valid, so tests can make tokens expire, be revoked and be refused.
package githubapi
