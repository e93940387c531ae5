// Package kubetest runs a real kube-apiserver and etcd (controller-runtime's envtest, with
// the binaries `make tools` builds into ./bin) loaded with Stackwright's CRDs, once per
// test package.
//
// It is also the one harness of the controller suites: Manager starts one real manager per
// package from TestMain, and each test works through a Scenario, in a namespace of its own,
// so that the tests of a package run in parallel against that manager:
//
//	func TestMain(m *testing.M) { kubetest.Main(m, &env, kubetest.Manager(setup)) }
//
//	func TestX(t *testing.T) {
//		t.Parallel()
//		s := env.Scenario(t)
//		s.Create(obj)
//		s.WaitCondition(obj, "Ready", metav1.ConditionTrue, "")
//	}
//
// A controller's events must come only after the status they announce was written; a
// suite checks it by giving the controller a Recorder, which reads the object from the API
// server as each event comes, and asserting that Recorder.Unwritten is empty.
//
// Env.Restart crashes etcd or kube-apiserver and starts it again in place, for the fault
// tests of a control plane restart (test/chaos); such a test must not run in parallel.
package kubetest
