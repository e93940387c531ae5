// Command pause is the pod sandbox's "pause" process, for clusters that import their
// images instead of pulling registry.k8s.io/pause. It holds the pod's namespaces open and,
// as the sandbox's PID 1, reaps orphans re-parented to it (with a shared PID namespace) so
// they do not pile up as zombies. SIGINT and SIGTERM end it cleanly; as PID 1 it would
// otherwise ignore them, and the kubelet would wait for the kill timeout.
//
// Built static (CGO_ENABLED=0) because its image has no libc.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// One SIGCHLD may stand for several exits, so reap until none is left.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
