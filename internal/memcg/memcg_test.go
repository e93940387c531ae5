package memcg

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeTree writes files (path relative to dir: content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	// What the kernel writes for a v1 cgroup without a limit.
	v1Unlimited = "9223372036854771712\n"
	// A v1 memory.oom_control of Linux 4.13 or later, and one of an older kernel.
	v1OOMControl2Kills = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"
	v1OOMControlOld    = "oom_kill_disable 0\nunder_oom 0\n"
	// A v2 memory.events after one kill.
	v2Events1Kill = "low 0\nhigh 0\nmax 14\noom 1\noom_kill 1\noom_group_kill 0\n"
)

// The cgroup of the calling process is found from its membership in either version, on a
// host (the membership's path under the mount) or in a container (its own cgroup at the
// mount), and its limit is the one that applies to it.
func TestReader_Read_FindsTheProcesssMemoryCgroup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		membership string
		files      map[string]string
		// want's Dir is relative to the root.
		want    Memory
		wantErr error
	}{
		{
			name:       "v1HostPodLimitFromHierarchy",
			membership: "9:name=systemd:/\n4:memory:/kubepods/burstable/pod1/c1\n3:cpuset:/\n0::/\n",
			files: map[string]string{
				"memory/kubepods/burstable/pod1/c1/memory.oom_control":    v1OOMControl2Kills,
				"memory/kubepods/burstable/pod1/c1/memory.limit_in_bytes": v1Unlimited,
				"memory/kubepods/burstable/pod1/c1/memory.stat":           "cache 0\nrss 1024\nhierarchical_memory_limit 268435456\nhierarchical_memsw_limit 9223372036854771712\n",
				// The root cgroup, which a process of the host's root would read.
				"memory/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 40\n",
			},
			want: Memory{Version: 1, Dir: "memory/kubepods/burstable/pod1/c1", Limit: 256 << 20, OOMKills: 2},
		},
		{
			name:       "v1ContainerSeesItsOwnCgroupAtTheMount",
			membership: "4:memory:/kubepods/burstable/pod1/c1\n0::/\n",
			files: map[string]string{
				"memory/memory.oom_control":    v1OOMControl2Kills,
				"memory/memory.limit_in_bytes": "536870912\n",
				"memory/memory.stat":           "cache 0\nhierarchical_memory_limit 536870912\n",
			},
			want: Memory{Version: 1, Dir: "memory", Limit: 512 << 20, OOMKills: 2},
		},
		{
			name:       "v1CombinedControllersWithoutStat",
			membership: "7:cpuacct,memory:/job\n",
			files: map[string]string{
				"memory/job/memory.oom_control":    v1OOMControl2Kills,
				"memory/job/memory.limit_in_bytes": "67108864\n",
			},
			want: Memory{Version: 1, Dir: "memory/job", Limit: 64 << 20, OOMKills: 2},
		},
		{
			name:       "v1Unlimited",
			membership: "4:memory:/job\n",
			files: map[string]string{
				"memory/job/memory.oom_control":    v1OOMControl2Kills,
				"memory/job/memory.limit_in_bytes": v1Unlimited,
				"memory/job/memory.stat":           "hierarchical_memory_limit " + v1Unlimited,
			},
			want: Memory{Version: 1, Dir: "memory/job", OOMKills: 2},
		},
		{
			name:       "v1KernelThatCountsNoKills",
			membership: "4:memory:/job\n",
			files: map[string]string{
				"memory/job/memory.oom_control":    v1OOMControlOld,
				"memory/job/memory.limit_in_bytes": "67108864\n",
			},
			wantErr: ErrNotCounted,
		},
		{
			name:       "v1WinsOnAHybridHost",
			membership: "4:memory:/job\n0::/job\n",
			files: map[string]string{
				"memory/job/memory.oom_control":    v1OOMControl2Kills,
				"memory/job/memory.limit_in_bytes": "67108864\n",
				"unified/job/cgroup.procs":         "",
			},
			want: Memory{Version: 1, Dir: "memory/job", Limit: 64 << 20, OOMKills: 2},
		},
		{
			name:       "v2ContainerWithNamespace",
			membership: "0::/\n",
			files: map[string]string{
				"cgroup.controllers": "cpu memory pids\n",
				"memory.events":      v2Events1Kill,
				"memory.max":         "268435456\n",
			},
			want: Memory{Version: 2, Dir: ".", Limit: 256 << 20, OOMKills: 1},
		},
		{
			name:       "v2HostLimitFromAnAncestor",
			membership: "0::/kubepods.slice/pod1.slice/cri-c1.scope\n",
			files: map[string]string{
				"kubepods.slice/memory.max":                            "max\n",
				"kubepods.slice/pod1.slice/memory.max":                 "536870912\n",
				"kubepods.slice/pod1.slice/cri-c1.scope/memory.max":    "max\n",
				"kubepods.slice/pod1.slice/cri-c1.scope/memory.events": v2Events1Kill,
			},
			want: Memory{Version: 2, Dir: "kubepods.slice/pod1.slice/cri-c1.scope", Limit: 512 << 20, OOMKills: 1},
		},
		{
			name:       "v2ContainerWithoutNamespace",
			membership: "0::/kubepods.slice/pod1.slice/cri-c1.scope\n",
			files: map[string]string{
				"memory.events": v2Events1Kill,
				"memory.max":    "max\n",
			},
			want: Memory{Version: 2, Dir: ".", OOMKills: 1},
		},
		{
			name:       "noMemoryController",
			membership: "4:memory:/job\n0::/job\n",
			files:      map[string]string{"job/cgroup.procs": ""},
			wantErr:    ErrNoMemoryCgroup,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			writeTree(t, root, tt.files)
			membership := filepath.Join(t.TempDir(), "cgroup")
			writeTree(t, filepath.Dir(membership), map[string]string{"cgroup": tt.membership})
			got, err := Reader{Root: root, Membership: membership}.Read()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Read error = %v; want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			got.Dir, err = filepath.Rel(root, got.Dir)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A Watch counts the kills between its start and Kills, and none when the cgroup could
// not be read or is another one by then.
func TestWatch_Kills_CountsSinceItStarted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// before and after are the files when the watch starts and when it is asked.
		before, after map[string]string
		want          uint64
		wantErr       error
	}{
		{
			name:   "v1Killed",
			before: map[string]string{"memory/job/memory.oom_control": v1OOMControl2Kills, "memory/job/memory.limit_in_bytes": "67108864\n"},
			after:  map[string]string{"memory/job/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n"},
			want:   3,
		},
		{
			name:   "v1NotKilled",
			before: map[string]string{"memory/job/memory.oom_control": v1OOMControl2Kills, "memory/job/memory.limit_in_bytes": "67108864\n"},
			want:   0,
		},
		{
			name:    "unreadableAtTheStart",
			after:   map[string]string{"memory/job/memory.oom_control": v1OOMControl2Kills, "memory/job/memory.limit_in_bytes": "67108864\n"},
			wantErr: ErrNoMemoryCgroup,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			membership := filepath.Join(root, "self-cgroup")
			writeTree(t, root, map[string]string{"self-cgroup": "4:memory:/job\n"})
			writeTree(t, root, tt.before)
			w := Reader{Root: root, Membership: membership}.Watch()
			writeTree(t, root, tt.after)
			got, _, err := w.Kills()
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("Kills = %d, %v; want %d, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestMemory_KillsSince_OnlyOfTheSameCgroup(t *testing.T) {
	t.Parallel()
	before := Memory{Version: 1, Dir: "/sys/fs/cgroup/memory/a", OOMKills: 2}
	tests := []struct {
		name string
		now  Memory
		want uint64
	}{
		{name: "sameCgroup", now: Memory{Version: 1, Dir: "/sys/fs/cgroup/memory/a", OOMKills: 3}, want: 1},
		{name: "anotherCgroup", now: Memory{Version: 1, Dir: "/sys/fs/cgroup/memory/b", OOMKills: 9}},
		{name: "anotherVersion", now: Memory{Version: 2, Dir: "/sys/fs/cgroup/memory/a", OOMKills: 9}},
		{name: "counterWentBack", now: Memory{Version: 1, Dir: "/sys/fs/cgroup/memory/a", OOMKills: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.now.KillsSince(before); got != tt.want {
				t.Errorf("KillsSince = %d; want %d", got, tt.want)
			}
		})
	}
}
