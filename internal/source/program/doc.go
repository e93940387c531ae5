// Package program renders a Program (pulumi.com/v1) into the Pulumi YAML project it stands
// for: a deterministic Pulumi.yaml, so that equal programs share one artifact, and the
// revision a Stack records for it. It does not evaluate expressions; the YAML language host
// does, at run time.
package program
