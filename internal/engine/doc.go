// Package engine is the only code in Stackwright that talks to Pulumi. It drives the real
// pulumi CLI through the Automation API (auto.LocalWorkspace) over a work dir that already
// holds an extracted project: it selects or creates the stack, writes the stack's
// configuration (plain values into Pulumi.<stack>.yaml, secrets encrypted by the CLI with
// the stack's secrets provider), runs one operation (up, preview, refresh, destroy or a
// drift check) under a cancellable context, and reports outputs (secret ones flagged),
// resource change counts and a human summary.
//
// It also owns what callers need to act on a failed run without knowing the CLI: Classify
// maps an error to a retry class, Message turns the CLI's output into a bounded,
// secret-free condition message, and Tail keeps the end of the progress log for an
// Update's status.
//
// Nothing here touches the process environment: every CLI invocation gets its environment
// explicitly, so concurrent runs for different stacks (and backends, and credentials) can
// share one process.
package engine
