// Package runner executes exactly one Update: it resolves the Stack's inputs, extracts and
// verifies the artifact into a fresh work directory, runs the engine, writes the outputs to
// a Secret owned by the Update, and records the outcome in the Update's status. Every
// executor (local goroutines today, Jobs later) runs Updates through it.
package runner
