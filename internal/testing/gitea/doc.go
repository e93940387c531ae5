// Package gitea runs a real forge for tests: Gitea (bin/gitea, built by `make gitea` from
// its Go module, not by `make tools`) on 127.0.0.1 with a port of its own, its SQLite
// database, repositories and log in a temporary directory, stopped when the test ends.
// Start creates a site administrator and an API token for it; a Repo pushes commits over
// git's smart HTTP, opens and closes pull requests, comments, sets and reads commit
// statuses and adds webhooks (which Gitea may deliver to loopback and private addresses)
// through Gitea's API. Tests that need it skip when bin/gitea is missing.
//
// The binary embeds its templates, locales and licences (tag bindata), but not the web
// UI's scripts and styles (built with npm upstream): pages render, unstyled, and the log
// says the frontend manifest is missing. The API and git over HTTP need neither.
package gitea
