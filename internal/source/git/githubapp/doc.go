// Package githubapp turns a GitHub App's credentials (app ID, installation ID, PEM private
// key) into installation access tokens for git over HTTPS, the way PKO's
// spec.gitAuth.githubApp does, and keeps each token until shortly before it expires.
//
// Tokens are minted with github.com/bradleyfalzon/ghinstallation/v2 (an RS256 JWT issued
// by the app, exchanged at POST /app/installations/{id}/access_tokens) and presented to git
// as the HTTP password of user x-access-token. The cache is keyed by namespace, API URL,
// app, installation and a hash of the private key, so two tenants never share a token, even
// with the same app, and a replaced key takes effect at once.
//
// Neither the private key nor a token is ever put in an error or a log line: errors say
// which step failed and what GitHub answered (its status, not its body, which a hostile
// Enterprise host could fill with anything).
package githubapp
