// Command stackwright is the single Stackwright binary; each role is a subcommand.
package main
