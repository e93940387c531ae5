// Package program gives a Stack the artifact of the Program (pulumi.com/v1) it runs: its
// Resolver returns what the Program controller recorded in the Program's status, and
// renders and stores the artifact again when a fresh store lacks it. Rendering itself is
// the project package's.
package program
