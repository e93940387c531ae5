// Package procfs reads what Linux's /proc says about a process: its parent, command name,
// CPU time and memory, and the children of a process by command name. The benchmark costs
// processes with it, and the test control plane finds its etcd and kube-apiserver with it.
package procfs
