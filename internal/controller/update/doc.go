// Package update reconciles Updates: it hands Pending ones to the executor and fails the
// Running ones whose runner is gone (the manager restarted mid-run), so that the Stack
// controller sees a finished Update and retries instead of waiting forever.
package update
