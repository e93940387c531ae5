// Package cluster runs a real one-node Kubernetes cluster on this machine, offline, for
// end-to-end tests and for trying Stackwright in a cluster (`make cluster`): etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, containerd with Debian's runc
// and CNI plugins, kubelet and kube-proxy, all built from the Go module proxy into ./bin.
//
// Every component runs in a network namespace of its own (NetNS), joined to the host by
// one veth pair: the host reaches the API server, Pods and Services through it, and no
// cluster traffic is routed beyond the machine. A supervisor process started by Up keeps
// the components running; Down stops it and removes containers, mounts, cgroups and the
// namespace. Nothing is pulled from the internet: images are imported from OCI archives
// (Load), or pulled from a registry a test runs on the host's end of the veth (HostIP),
// which TrustRegistry tells containerd to reach over plain HTTP.
package cluster
