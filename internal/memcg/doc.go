// Package memcg reads the memory cgroup of the calling process: its memory limit and how
// many of its processes the kernel's OOM killer has killed. A runner Pod reads it before
// and after its run, so that a run whose provider plugin or language host was killed for
// lack of memory says so (reason OOMKilled) instead of quoting the engine's broken pipe.
//
// Both cgroup versions are read: v1's memory controller (memory.oom_control's oom_kill
// line, kernel 4.13 or later; memory.stat's hierarchical_memory_limit) and v2's unified
// hierarchy (memory.events' oom_kill line; memory.max). The process's cgroup is found
// from /proc/self/cgroup, under the mount point given; inside a container, whose own
// cgroup is mounted where the host's root would be, the mount point itself.
package memcg
