// Package gc removes what the manager keeps on its data volume once nothing needs it:
// artifacts that no Stack (its last deployed artifact), Program (its current artifact) or
// unfinished Update names and that have not been used for a retention period, and the git
// repositories of remotes no Stack has fetched from for a while. Without it the data
// volume grows with every commit, Program edit and repository for as long as it lasts.
package gc
