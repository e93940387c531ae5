// Package gitserver gives tests real git repositories (made with the git CLI) served over
// smart HTTP or HTTPS by git's own git-http-backend on 127.0.0.1 (or a listener the test
// made, e.g. inside the test cluster's network namespace), with basic auth (fixed users,
// or a callback for passwords valid only for a while) and counters of ref listings and
// fetches. Another handler (a fake API of the git host) can share the server. The product
// never shells out to git; tests may.
package gitserver
