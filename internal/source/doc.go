// Package source turns a Stack's source (a Program, a git repository or a Flux source) into
// an Artifact: an immutable, digest-addressed tarball in the artifact store plus the
// revision it came from. The Stack controller only sees this package's Resolver interface;
// each kind of source lives in its own subpackage.
package source
