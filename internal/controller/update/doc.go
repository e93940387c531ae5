// Package update reconciles Updates: it hands Pending ones to the executor, and asks it
// about Running ones; an Update whose runner the executor finds gone (a manager restarted
// mid-run, a runner Job that ended without its result or vanished) or never started is
// failed here, once, so that the Stack controller sees a finished Update and retries
// instead of waiting forever. It watches runner Jobs, so a runner's end is judged when it
// happens.
package update
