package job

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/memcg"
)

// A failed run is OOMKilled, naming the limit, exactly when the runner's memory cgroup
// counted an OOM kill during it; otherwise, or when the cgroup cannot be read, its error
// stands.
func TestOutOfMemory_FailedRun_OOMKilledOnlyWhenTheCgroupCountedAKill(t *testing.T) {
	const cg = "memory/kubepods/pod1/runner/"
	oomControl := func(kills string) string { return "oom_kill_disable 0\nunder_oom 0\noom_kill " + kills + "\n" }
	runErr := errors.New("error: pulumi-resource-stackwright-testing: rpc error: code = Unavailable desc = error reading from server: EOF")
	type outcome struct {
		Reason string
		Error  string
	}
	tests := []struct {
		name          string
		before, after map[string]string
		want          outcome
	}{
		{
			name:   "killedDuringTheRun",
			before: map[string]string{cg + "memory.oom_control": oomControl("0"), cg + "memory.limit_in_bytes": "268435456\n"},
			after:  map[string]string{cg + "memory.oom_control": oomControl("1")},
			want: outcome{Reason: v1alpha1.ReasonOOMKilled, Error: "out of memory: the kernel killed a process of the runner (the runner's memory limit is 256Mi); " +
				"the engine then failed: pulumi-resource-stackwright-testing: rpc error: code = Unavailable desc = error reading from server: EOF"},
		},
		{
			name:   "killedBeforeTheRunOnly",
			before: map[string]string{cg + "memory.oom_control": oomControl("3"), cg + "memory.limit_in_bytes": "268435456\n"},
			want:   outcome{Error: runErr.Error()},
		},
		{
			name: "noMemoryCgroup",
			want: outcome{Error: runErr.Error()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			write := func(files map[string]string) {
				for name, content := range files {
					path := filepath.Join(root, name)
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			write(map[string]string{"self-cgroup": "4:memory:/kubepods/pod1/runner\n0::/\n"})
			write(tt.before)
			w := memcg.Reader{Root: root, Membership: filepath.Join(root, "self-cgroup")}.Watch()
			write(tt.after)
			err := outOfMemory(w, runErr)
			got := outcome{Error: err.Error()}
			if f, ok := fault.As(err); ok {
				got.Reason = f.Reason
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
