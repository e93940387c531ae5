// Package enginetest gives a test the real pulumi CLI (from ./bin) with everything it
// touches isolated: its own PULUMI_HOME, a file:// backend, a passphrase secrets provider,
// no plugin downloads, no update checks, and a scratch root for the test provider's files.
package enginetest
