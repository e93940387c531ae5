// Package predicates holds the event filters more than one controller watches with, so
// that "which changes of an Update matter" is decided once.
package predicates
