// Package stackset owns the StackSet controller: it lists a set's elements (a
// repository's branches or project directories, or a list), renders one Stack per element
// from the set's template, keeps those Stacks as rendered, and orphans or destroys the
// Stacks of elements that disappear, within the set's bound on removals.
package stackset
