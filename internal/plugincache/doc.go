// Package plugincache owns the manager's cache of Pulumi plugins for runner Pods, on
// installs that opt into downloads: a runner asks the manager for a plugin tarball by its
// file name, and the manager serves it from disk or fetches it once from the one plugin
// source the platform team named, so a provider crosses the cluster's egress once per
// cluster rather than once per Update. Tenants only ever name a file: the cache validates
// the name, never fetches from anywhere else, bounds each download and the whole cache,
// runs a bounded number of downloads at once, and remembers what the source does not have
// for a while, so that no tenant can fill the manager's disk or make it a proxy.
package plugincache
