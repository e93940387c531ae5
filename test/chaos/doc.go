// Package chaos kills the manager with SIGKILL, again and again, while a fleet of Program
// Stacks converges, and checks what must survive any crash: every Stack reaches Ready, no
// stack lock is left in the backend, every program's side effects are there, and no pulumi
// process outlives the manager that started it. It reports the crashes injected and the
// engine runs that applied one desired state twice. The control plane's own faults are
// here too: an API server outage, the leader Lease lost, and etcd and kube-apiserver
// restarted in place. `make test` runs a short profile;
// `make test-chaos` a longer one (CHAOS_STACKS, CHAOS_KILLS, CHAOS_SEED).
package chaos
