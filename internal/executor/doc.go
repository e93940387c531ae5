// Package executor defines where Updates run: the Executor the Update controller submits
// every Pending Update to, and the Detacher that runs the Updates never written to the API
// server. Each implementation lives in a subpackage: local runs Updates as engine
// processes of the manager itself (and is the only Detacher); job runs each Update in a
// runner Pod of its own, a Job in the Stack's namespace. Both take their Updates from a
// Queue, which shares their slots out fairly among namespaces.
package executor
