// Package gc removes what the manager keeps on its data volume once nothing needs it:
// artifacts that no Stack (its last deployed artifact), Program (its current artifact) or
// unfinished Update names and that have not been used for a retention period. Without it
// the store grows with every commit and every Program edit for as long as the volume lasts.
package gc
