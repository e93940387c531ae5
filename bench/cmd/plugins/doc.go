// Command plugins benchmarks a real provider under the Job executor on the one-node
// cluster of `make cluster` (`make bench-plugins`): a Stack whose program manages three
// ConfigMaps through the Kubernetes provider, which its runner Pods get from the plugins
// image (an image volume), is changed again and again, and each change is timed from
// `kubectl apply` to Ready and split into phases; the same change made by the bare CLI
// (`pulumi up --skip-preview`, the provider on PATH) is the floor. It also reports what
// the node's image store gained over the changes: the plugin bytes fetched. Results go to
// bench/results/<date>-plugins.md.
package main
