// Package statustest is the harness of the controllers' status setter table tests: it
// builds the kstatus conditions the setters write (api/conditions' Mark functions),
// compares them, and runs the cases shared by every controller, which each package's tests
// would otherwise carry a copy of.
package statustest
