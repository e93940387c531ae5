// Package forge owns Stackwright's conversations with the forges that host pull requests
// (Gitea, GitHub, GitLab): listing a repository's open pull requests for a StackSet's
// pullRequests generator, and giving a pull request its feedback (one comment per Stack,
// found again by a hidden marker and edited in place; a commit status on its head).
//
// Everything a forge answers is a tenant's input: responses are read up to a size, pages up
// to a count, and nothing in them chooses where the next request goes. The token is only
// ever sent to the API base URL the set names.
package forge
