package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// setupNetwork creates the cluster's network namespace and the veth pair that joins it to
// the host, and routes the Pod and Service ranges from the host into it. Everything the
// cluster does on the network stays in that namespace or on that pair: no address outside
// the machine is reachable from a Pod, because neither side forwards beyond the pair.
func setupNetwork(ctx context.Context) error {
	if !exists("/var/run/netns/" + NetNS) {
		// A host veth left without its namespace belongs to a dying one: wait it out.
		if err := teardownNetwork(ctx); err != nil {
			return err
		}
		if err := run(ctx, "ip", "netns", "add", NetNS); err != nil {
			return err
		}
	}
	if err := exec.CommandContext(ctx, "ip", "link", "show", hostVeth).Run(); err != nil {
		if err := run(ctx, "ip", "link", "add", hostVeth, "type", "veth", "peer", "name", nodeVeth, "netns", NetNS); err != nil {
			return err
		}
	}
	steps := [][]string{
		{"ip", "addr", "replace", HostIP + linkCIDR, "dev", hostVeth},
		{"ip", "link", "set", hostVeth, "up"},
		{"ip", "route", "replace", PodCIDR, "via", NodeIP, "dev", hostVeth},
		{"ip", "route", "replace", ServiceCIDR, "via", NodeIP, "dev", hostVeth},
		{"ip", "-n", NetNS, "link", "set", "lo", "up"},
		{"ip", "-n", NetNS, "addr", "replace", NodeIP + linkCIDR, "dev", nodeVeth},
		{"ip", "-n", NetNS, "link", "set", nodeVeth, "up"},
		// Local processes (the API server, the kubelet) need a route to a Service address
		// for kube-proxy's DNAT to apply; unmatched packets die at the host, which does
		// not forward.
		{"ip", "-n", NetNS, "route", "replace", ServiceCIDR, "via", HostIP, "dev", nodeVeth},
		// ip_forward is per network namespace: the node routes between its bridge and its
		// veth; the host's setting is left alone.
		{"ip", "netns", "exec", NetNS, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"ip", "netns", "exec", NetNS, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1"},
	}
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	// kube-proxy needs bridged Pod → Service → Pod packets to traverse iptables; where
	// br_netfilter is not available, masqueradeAll in its configuration covers it.
	_ = run(ctx, "ip", "netns", "exec", NetNS, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1")
	return nil
}

// teardownNetwork deletes the namespace, which takes the veth pair, the bridge, the
// routes through it and every iptables rule kube-proxy wrote with it. The kernel destroys
// a namespace, and the host's end of the pair with it, a moment after its last reference
// goes: teardownNetwork waits for that, so that an `up` right after a `down` (a reboot)
// does not take the dying veth for its own.
func teardownNetwork(ctx context.Context) error {
	if exists("/var/run/netns/" + NetNS) {
		if err := run(ctx, "ip", "netns", "del", NetNS); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for exec.CommandContext(ctx, "ip", "link", "show", hostVeth).Run() == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("the host's veth %s outlived the cluster's network namespace by 30s", hostVeth)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// inNetNS reports whether this process runs in the cluster's network namespace.
func inNetNS() bool {
	ns, err := os.Stat("/var/run/netns/" + NetNS)
	if err != nil {
		return false
	}
	self, err := os.Stat("/proc/self/ns/net")
	return err == nil && os.SameFile(ns, self)
}

// checkHost names whatever this machine lacks to run a node, before anything starts.
func checkHost(bin string) error {
	var missing []string
	for _, p := range []string{runcPath, cniBinDir + "/bridge", cniBinDir + "/host-local", cniBinDir + "/loopback", cniBinDir + "/portmap"} {
		if !exists(p) {
			missing = append(missing, p)
		}
	}
	for _, tool := range []string{"ip", "iptables", "nsenter", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr"} {
		if !exists(bin + "/" + b) {
			missing = append(missing, bin+"/"+b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("this machine cannot run the cluster yet, missing: %s (run `make tools-cluster` as root)", strings.Join(missing, ", "))
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the cluster needs root (network namespaces, mounts, cgroups)")
	}
	return nil
}
