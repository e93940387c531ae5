// Package reaper runs a command so that no process it starts outlives it, or outlives the
// process that started it.
//
// The pulumi CLI starts its language host and providers in process groups of their own,
// so killing the CLI's group misses them, and a CLI killed hard (or whose manager or
// runner was) leaves them running. A reaper is a small binary of its own,
// stackwright-reaper (cmd/stackwright-reaper, installed next to stackwright), started in
// between: it becomes the subreaper of everything below it, so whatever the CLI leaves
// behind is reparented to it; when the CLI exits, when its starter asks, or when its
// starter dies, it kills every descendant it has and exits as the CLI did. It is not the
// stackwright binary started again: that one's start-up alone costs tens of milliseconds
// of CPU and tens of megabytes, on every CLI run.
package reaper
