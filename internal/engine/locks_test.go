package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStaleLockHolders(t *testing.T) {
	const two = "failed to update stack dev: the stack is currently locked by 2 lock(s). Either wait for the other process(es) to end or delete the lock file with `pulumi cancel`.\n" +
		"  s3://b/.pulumi/locks/organization/p/dev/1.json: created by nonroot@web-abc-1-5f2e9a1b-x7k2p (pid 12) at 2026-11-23T10:00:00Z\n" +
		"  s3://b/.pulumi/locks/organization/p/dev/2.json: created by nonroot@web-abc-2-0c1d2e3f-q9w8e (pid 13) at 2026-11-23T10:01:00Z"
	hosts := func(prefixes ...string) func(string, int) bool {
		return func(host string, _ int) bool { return hasAnyPrefix(host, prefixes) }
	}
	for _, tc := range []struct {
		name string
		text string
		gone func(string, int) bool
		want []string
	}{
		{name: "all holders gone", text: two, gone: hosts("web-abc-1-5f2e9a1b-", "web-abc-2-0c1d2e3f-"), want: []string{"web-abc-1-5f2e9a1b-x7k2p (pid 12)", "web-abc-2-0c1d2e3f-q9w8e (pid 13)"}},
		{name: "one holder alive", text: two, gone: hosts("web-abc-1-5f2e9a1b-")},
		{name: "holder proven gone by its pid", text: two, gone: func(_ string, pid int) bool { return pid == 12 || pid == 13 }, want: []string{"web-abc-1-5f2e9a1b-x7k2p (pid 12)", "web-abc-2-0c1d2e3f-q9w8e (pid 13)"}},
		{name: "holder line missing", text: strings.SplitN(two, "\n", 3)[0] + "\n" + strings.SplitN(two, "\n", 3)[1], gone: hosts("web-abc-1-5f2e9a1b-")},
		{name: "pulumi cloud conflict", text: "[409] Conflict: Another update is currently in progress.", gone: hosts("web-")},
		{name: "empty prefix proves nothing", text: two, gone: hosts("")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holders, locks := staleLockHolders(tc.text, tc.gone)
			if diff := cmp.Diff(tc.want, holders); diff != "" {
				t.Errorf("staleLockHolders holders (-want +got):\n%s", diff)
			}
			var wantLocks []string
			if tc.want != nil {
				wantLocks = []string{"s3://b/.pulumi/locks/organization/p/dev/1.json", "s3://b/.pulumi/locks/organization/p/dev/2.json"}
			}
			if diff := cmp.Diff(wantLocks, locks); diff != "" {
				t.Errorf("staleLockHolders locks (-want +got):\n%s", diff)
			}
		})
	}
}

// plantLock leaves a lock in the file:// backend as a runner killed mid-update would: the
// lock and the attributes sidecar gocloud's fileblob writes next to every blob.
func plantLock(t *testing.T, f *fixture, host string, pid int) string {
	t.Helper()
	dir := filepath.Join(strings.TrimPrefix(f.env.Backend, "file://"), ".pulumi", "locks", "organization", "enginetest", "dev")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "0b7c2d9e-1f3a-4c5b-8d6e-7f8a9b0c1d2e.json")
	lock := fmt.Sprintf(`{"pid":%d,"username":"nonroot","hostname":%q,"timestamp":"2026-11-23T10:00:00Z"}`, pid, host)
	if err := os.WriteFile(path, []byte(lock), 0o600); err != nil {
		t.Fatal(err)
	}
	attrs := `{"user.cache_control":"","user.content_disposition":"","user.content_encoding":"","user.content_language":"","user.content_type":"application/json","user.metadata":null,"md5":"CCkudJhHRtUEy6CqZd0XMQ=="}`
	if err := os.WriteFile(path+".attrs", []byte(attrs), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// requireNoLockFiles fails unless the stack's lock directory holds nothing, sidecars included.
func requireNoLockFiles(t *testing.T, lock string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(lock))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if len(left) > 0 {
		t.Errorf("lock files left after healing: %v", left)
	}
}

func TestEngine_Run_StaleLockOfGoneRunnerIsHealed(t *testing.T) {
	t.Parallel()
	f, _ := upFiles(t)
	ctx := testContext(t)
	lock := plantLock(t, f, "web-abc-1-5f2e9a1b-x7k2p", 7)

	r := f.request(OpUp)
	r.StaleLockHosts = []string{"web-abc-2-0c1d2e3f-"} // another runner: this lock's holder is not proven gone
	if _, err := f.eng.Run(ctx, r); Classify(err) != ClassConflict {
		t.Fatalf("up on a lock of a holder not proven gone: Classify(%v) = %q; want Conflict", err, Classify(err))
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the lock of a holder not proven gone was removed: %v", err)
	}

	r.StaleLockHosts = []string{"web-abc-1-5f2e9a1b-"}
	res := f.mustRun(ctx, r)
	if got := res.Changes["same"]; got == 0 {
		t.Errorf("up after healing: changes %v; want the existing resources unchanged", res.Changes)
	}
	requireNoLockFiles(t, lock)
	if !strings.Contains(f.log.String(), "removed 1 stale lock(s) held by process(es) that are gone: web-abc-1-5f2e9a1b-x7k2p (pid 7)") {
		t.Errorf("the log does not say which lock was removed:\n%s", f.log)
	}
	if diff := cmp.Diff([]string{"web-abc-1-5f2e9a1b-x7k2p (pid 7)"}, res.HealedLocks); diff != "" {
		t.Errorf("HealedLocks (-want +got):\n%s", diff)
	}
}

// A lock this host's pulumi left when it was killed with its manager is healed when its
// pid is gone, and kept while a process with that pid runs (a person's pulumi, say).
func TestEngine_Run_StaleLocalLockIsHealedOnlyWhenItsProcessIsGone(t *testing.T) {
	t.Parallel()
	f, _ := upFiles(t)
	ctx := testContext(t)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	lock := plantLock(t, f, host, os.Getpid())
	r := f.request(OpUp)
	r.StaleLocalLocks = true
	if _, err := f.eng.Run(ctx, r); Classify(err) != ClassConflict {
		t.Fatalf("up on the lock of a live local process: Classify(%v) = %q; want Conflict", err, Classify(err))
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the lock of a live local process was removed: %v", err)
	}

	dead := exec.CommandContext(ctx, "true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	lock = plantLock(t, f, host, dead.Process.Pid)
	f.mustRun(ctx, r)
	requireNoLockFiles(t, lock)

	// Another host's lock is never this host's to judge.
	lock = plantLock(t, f, "elsewhere", dead.Process.Pid)
	if _, err := f.eng.Run(ctx, r); Classify(err) != ClassConflict {
		t.Errorf("up on another host's lock: Classify(%v) = %q; want Conflict", err, Classify(err))
	}
	_ = os.Remove(lock)
	_ = os.Remove(lock + ".attrs")
}

// A pulumi killed while creating its stack leaves a lock and no stack, which `pulumi cancel`
// cannot clear: the lock file of a holder proven gone is removed instead, and the first
// update goes on. (A live holder's lock is kept before cancel is tried, as above.)
func TestEngine_Run_StaleLockWithoutStackIsHealed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, filesProgram)
	ctx := testContext(t)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	lock := plantLock(t, f, host, 1<<22) // above any pid_max: no process has it
	r := f.request(OpUp)
	r.StaleLocalLocks = true
	f.mustRun(ctx, r)
	f.requireContent("a.txt", "hello")
	requireNoLockFiles(t, lock)
}
