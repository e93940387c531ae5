package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// stopContainers stops every container of the node through runc, whose state for this
// cluster lives in its own root, so nothing else on the machine is touched.
func stopContainers(ctx context.Context, l layout) {
	root := filepath.Join(l.runcRoot(), "k8s.io")
	ids, err := exec.CommandContext(ctx, runcPath, "--root", root, "list", "-q").Output()
	if err != nil {
		return
	}
	for _, id := range strings.Fields(string(ids)) {
		_ = exec.CommandContext(ctx, runcPath, "--root", root, "delete", "--force", id).Run()
	}
}

// cleanupNode removes what the node leaves on the machine when it stops or crashes:
// containers, containerd shims, component processes, mounts under the cluster's
// directories and the kubelet's cgroups.
func cleanupNode(ctx context.Context, o Options) error {
	l := o.layout()
	stopContainers(ctx, l)
	killByExe(o.Bin)
	var errs []error
	if err := unmountUnder(l.dir, l.run); err != nil {
		errs = append(errs, err)
	}
	removeCgroups("kubepods")
	return errors.Join(errs...)
}

// killByExe kills the processes whose executable is in dir: component processes and
// containerd shims that survived their supervisor.
func killByExe(dir string) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || filepath.Dir(strings.TrimSuffix(exe, " (deleted)")) != dir {
			continue
		}
		// Only the cluster's own binaries: a developer's envtest in the same ./bin runs
		// kube-apiserver and etcd too, but never inside the cluster's network namespace.
		if !sameNetNS(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func sameNetNS(pid int) bool {
	ns, err := os.Stat("/var/run/netns/" + NetNS)
	if err != nil {
		return false
	}
	p, err := os.Stat(fmt.Sprintf("/proc/%d/ns/net", pid))
	return err == nil && os.SameFile(ns, p)
}

// unmountUnder detaches every mount below the given directories, deepest first: the
// kubelet's volume mounts, containerd's overlay snapshots and the Pods' network
// namespace files.
func unmountUnder(dirs ...string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("failed to read mounts: %w", err)
	}
	defer func() { _ = f.Close() }()
	var targets []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, d := range dirs {
			if mp == d || strings.HasPrefix(mp, d+"/") {
				targets = append(targets, mp)
			}
		}
	}
	sort.Slice(targets, func(i, j int) bool { return len(targets[i]) > len(targets[j]) })
	var errs []error
	for _, t := range targets {
		if err := syscall.Unmount(t, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("failed to unmount %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &c); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeCgroups removes the kubelet's cgroup tree from every v1 hierarchy, leaves first.
// A cgroup that still holds a process stays (rmdir fails), which is the safe outcome.
func removeCgroups(name string) {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		root := filepath.Join(h, name)
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}
