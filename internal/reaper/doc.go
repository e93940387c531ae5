// Package reaper runs a command so that no process it starts outlives it, or outlives the
// process that started it.
//
// The pulumi CLI starts its language host and providers in process groups of their own,
// so killing the CLI's group misses them, and a CLI killed hard (or whose manager or
// runner was) leaves them running. A reaper is this same binary started in between: it
// becomes the subreaper of everything below it, so whatever the CLI leaves behind is
// reparented to it; when the CLI exits, when its starter asks, or when its starter dies,
// it kills every descendant it has and exits as the CLI did.
package reaper
