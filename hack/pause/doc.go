// Command pause is the pod sandbox's "pause" process, for clusters that import their
// images instead of pulling registry.k8s.io/pause. It holds the pod's namespaces open and,
// as the sandbox's PID 1, reaps orphans re-parented to it (with a shared PID namespace) so
// they do not pile up as zombies. SIGINT and SIGTERM end it cleanly; as PID 1 it would
// otherwise ignore them, and the kubelet would wait for the kill timeout.
//
// Built static (CGO_ENABLED=0) because its image has no libc.
package main
