// Package tlscert keeps the manager's self-signed serving certificates (the runner API's,
// the conversion webhook's) in its data directory, so that a restarted manager serves the
// certificate its clients already trust: runners that pin it, and CustomResourceDefinitions
// whose caBundle holds it.
package tlscert
