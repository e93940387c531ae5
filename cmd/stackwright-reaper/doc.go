// Command stackwright-reaper runs a command so that nothing it starts outlives it or the
// process that started the reaper (internal/reaper). The engine starts every pulumi CLI
// under it; it is not meant to be run by hand.
package main
