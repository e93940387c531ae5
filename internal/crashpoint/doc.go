// Package crashpoint names the places where a crash of the manager is most likely to lose,
// repeat or wedge work (between recording an intent and acting on it, between an engine run
// and its record, around finalizers), so that test/chaos can kill the manager exactly
// there. Built without the chaos build tag, Hit compiles to nothing: release binaries
// cannot be made to crash by it.
package crashpoint
