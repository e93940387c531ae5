// Package manager assembles the controller-runtime manager: scheme, flags, health probes,
// metrics, leader election and the controllers. cmd/stackwright only calls Run.
package manager
