// Command pulumi-resource-stackwright-testing serves the stackwright-testing
// Pulumi resource provider. The engine starts it as a plugin; it is found by
// name on PATH or in the plugin cache.
package main
