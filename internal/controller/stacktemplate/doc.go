// Package stacktemplate reconciles StackTemplates: for each, it installs the
// CustomResourceDefinition of the kind the template defines (never one it did not create),
// has the instance controller serve that kind, counts the instances, and on deletion waits
// for the last instance before removing the definition.
package stacktemplate
