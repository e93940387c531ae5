// Package engine is the only code in Stackwright that talks to Pulumi. It drives the real
// pulumi CLI over a work dir that already holds an extracted project, one process per
// thing that needs one: a steady-state operation (up, preview, refresh, destroy or a drift
// check on a stack known to exist) is exactly one CLI process. Change counts and outputs
// come from that process's event log; the stack is created (`stack init`) only when it is
// new; plain config and the ESC environments to import are written into Pulumi.<stack>.yaml
// in this process, and only secret config values cost a process each (`config set
// --secret`, plaintext on stdin), once per stack: the engine remembers their ciphertexts. The values of secret outputs, which the
// event log never carries, are read from the state of a file:// backend with the
// passphrase provider, and elsewhere with one more call (`stack output --show-secrets`). The Automation API supplies the types, the
// project and stack settings files, and the CLI version check; none of its operation
// methods is used, because each of them starts two or three processes.
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
