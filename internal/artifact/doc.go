// Package artifact owns the on-disk form of sources: deterministic tar.gz packing, the
// content-addressed store ("sha256:<hex>" of the tarball bytes) that many Stacks on the same
// revision share, and hardened extraction of archives that come from outside the manager
// (git, Flux, users), which must never write or point outside the directory they unpack to.
package artifact
