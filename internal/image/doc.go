// Package image owns Stackwright's container images as data. A declarative Spec (files,
// directories, user, environment, entrypoint, labels) becomes an OCI image made of a base
// layer generated here — the few files a static binary needs from a distribution: passwd
// and group with a nonroot user, nsswitch.conf, /tmp, the host's CA bundle — and one layer
// of the given files. Images are written as OCI image-layout tar archives that
// `ctr images import` stores under their full reference, so a cluster node can load them
// without a Docker daemon or a registry.
//
// Builds are reproducible: fixed modification times (the Unix epoch, so a layer's digest
// is a function of its files alone), sorted entries, explicit owners and a fixed creation
// time (SOURCE_DATE_EPOCH) make the manifest digest a function of the inputs alone, so a
// changed digest always means changed content. Indexes of several platforms are pushed to
// a registry (Index, PushIndex), with artifacts that refer to them (PushArtifact).
package image
