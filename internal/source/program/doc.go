// Package program renders a Program (pulumi.com/v1) into the Pulumi YAML project it stands
// for: a deterministic Pulumi.yaml, so that equal programs share one artifact, the tarball
// (Tarball, the one render path, used by the Program controller) and the revision a Stack
// records for it. Its Resolver gives a Stack the artifact the Program controller recorded
// in the Program's status. It does not evaluate expressions; the YAML language host does,
// at run time.
package program
