// Command krew packs kubectl-stackwright binaries into release archives and writes the krew
// plugin manifest that installs them (`make krew`). The archives are reproducible: the
// same binaries give the same bytes, so the manifest's checksums can be recomputed by
// anyone who builds the release.
package main
