package engine

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/internal/testing/repo"
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

// startS3 runs an S3 server of our own (versitygw serving a directory, each subdirectory a
// bucket) on 127.0.0.1 for one test, and returns its endpoint and directory.
func startS3(t *testing.T, f *fixture) (endpoint, dir string) {
	t.Helper()
	if err := repo.RequireBinaries(f.env.Bin, "versitygw"); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	dir = t.TempDir()
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(f.env.Bin, "versitygw"), "--port", addr, "--access", s3Access, "--secret", s3Secret, "posix", "--nometa", dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("versitygw output:\n%s", out.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			return "http://" + addr, dir
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw not listening on %s after 30 s: %v", addr, err)
		}
	}
}

const (
	s3Access = "engine-test-access"
	s3Secret = "engine-test-secret-key"
)

// On an s3:// backend too, a lock left by a pulumi killed while creating its stack (which
// `pulumi cancel` cannot clear) is deleted once its holder is proven gone, through the S3
// API with the run's credentials, and the update goes on; a live holder's lock stays.
func TestEngine_Run_StaleLockWithoutStackOnS3IsHealed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, filesProgram)
	ctx := testContext(t)
	endpoint, dir := startS3(t, f)
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := f.request(OpUp)
	r.Env = maps.Clone(r.Env)
	r.Env["PULUMI_BACKEND_URL"] = "s3://state?endpoint=" + endpoint + "&region=us-east-1&use_path_style=true"
	r.Env["AWS_ACCESS_KEY_ID"], r.Env["AWS_SECRET_ACCESS_KEY"] = s3Access, s3Secret
	r.StaleLocalLocks = true
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	locks := filepath.Join(dir, "state", ".pulumi", "locks", "organization", "enginetest", "dev")
	plant := func(pid int) string {
		if err := os.MkdirAll(locks, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(locks, "6f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0.json")
		lock := fmt.Sprintf(`{"pid":%d,"username":"nonroot","hostname":%q,"timestamp":"2026-11-26T10:00:00Z"}`, pid, host)
		if err := os.WriteFile(path, []byte(lock), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	lock := plant(os.Getpid())
	if _, err := f.eng.Run(ctx, r); Classify(err) != ClassConflict {
		t.Fatalf("up on the lock of a live local process: Classify(%v) = %q; want Conflict", err, Classify(err))
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the lock of a live local process was removed: %v", err)
	}

	plant(1 << 22) // above any pid_max: no process has it
	f.mustRun(ctx, r)
	f.requireContent("a.txt", "hello")
	requireNoLockFiles(t, lock)
	if !strings.Contains(f.log.String(), "removed 1 stale lock(s) held by process(es) that are gone") {
		t.Errorf("the log does not say the lock was removed:\n%s", f.log)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", ".pulumi", "stacks", "enginetest", "dev.json")); err != nil {
		t.Errorf("no stack state in the S3 backend: %v", err)
	}
}
