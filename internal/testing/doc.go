// Package testing is the parent of the test harnesses shared by Stackwright's suites:
// repo (locating the checkout and its ./bin), kubetest (a real kube-apiserver + etcd via
// envtest, and the controller suites' shared manager, per-test Scenario and event-order
// Recorder), enginetest (the real pulumi CLI against an isolated file:// backend) and
// statustest (the conditions the status setters write, for their table tests).
// Nothing here is linked into the product binary.
package testing
