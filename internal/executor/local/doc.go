// Package local runs Updates inside the manager: a bounded pool of workers, each running
// one Update at a time through the runner (whose engine calls start pulumi as child
// processes), never two Updates of the same Stack at once, and at most MaxPerNamespace of
// one namespace; the namespaces take turns, each in the order its Updates were submitted
// (executor.Queue).
package local
