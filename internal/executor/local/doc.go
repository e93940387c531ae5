// Package local runs Updates inside the manager: a bounded pool of workers, each running
// one Update at a time through the runner (whose engine calls start pulumi as child
// processes), never two Updates of the same Stack at once, in the order they were
// submitted.
package local
