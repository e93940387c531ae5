package engine

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackwright/stackwright/internal/procfs"
)

// fakeCLI writes a "pulumi" that starts a long-lived child in a process group of its own
// (as the CLI starts its plugins), records the child's pid in pidFile, and then does what
// then says.
func fakeCLI(t *testing.T, pidFile, then string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pulumi")
	script := "#!/bin/sh\nsetsid sh -c 'echo $$ > " + pidFile + "; exec sleep 300' &\n" +
		"while [ ! -s " + pidFile + " ]; do sleep 0.02; done\n" + then + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitPid waits for the pid written to path.
func waitPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no pid written to %s", path)
	return 0
}

// TestProcGroup_Run_NoChildOutlivesTheCLI: the CLI exiting, or being cancelled, takes the
// processes it started along, whether or not it stopped them itself.
func TestProcGroup_Run_NoChildOutlivesTheCLI(t *testing.T) {
	tests := []struct {
		name    string
		then    string
		cancel  bool
		wantErr bool
	}{
		{name: "cliExitsLeavingAPlugin", then: "exit 0"},
		{name: "cliFails", then: "exit 3", wantErr: true},
		{name: "cliCancelled", then: "exec sleep 300", cancel: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "child.pid")
			c := command{path: fakeCLI(t, pidFile, tt.then)}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, _, _, _, err := c.run(ctx, t.TempDir(), nil, nil, nil, nil)
				done <- err
			}()
			child := waitPid(t, pidFile)
			if tt.cancel {
				cancel()
			}
			select {
			case err := <-done:
				if tt.wantErr != (err != nil) {
					t.Errorf("run() = %v; want an error: %t", err, tt.wantErr)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("run did not return")
			}
			if !procfs.Gone(child, 10*time.Second) {
				_ = syscall.Kill(child, syscall.SIGKILL)
				t.Errorf("the CLI's child %d outlived it", child)
			}
		})
	}
}

// helperEnv makes the test binary act as a manager that runs a CLI and then waits.
const helperEnv = "STACKWRIGHT_ENGINE_TEST_OWNER"

// TestProcGroup_Owner is not a test: it is the "manager" TestProcGroup_Run_CLIDiesWithItsOwner
// starts and kills.
func TestProcGroup_Owner(t *testing.T) {
	args := os.Getenv(helperEnv)
	if args == "" {
		t.Skip("helper process of TestProcGroup_Run_CLIDiesWithItsOwner")
	}
	path, _, _ := strings.Cut(args, "\x00")
	_, _, _, _, err := command{path: path}.run(context.Background(), os.TempDir(), nil, nil, nil, nil)
	t.Fatalf("the CLI returned while its owner lived: %v", err)
}

// TestProcGroup_Run_CLIDiesWithItsOwner: a manager killed hard (SIGKILL, no chance to
// cancel anything) takes its running CLI and the CLI's plugins along.
func TestProcGroup_Run_CLIDiesWithItsOwner(t *testing.T) {
	dir := t.TempDir()
	pidFile, cliPidFile := filepath.Join(dir, "child.pid"), filepath.Join(dir, "cli.pid")
	cli := fakeCLI(t, pidFile, "echo $$ > "+cliPidFile+"\nsleep 300")
	owner := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestProcGroup_Owner$")
	owner.Env = append(os.Environ(), helperEnv+"="+cli)
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	cliPid := waitPid(t, cliPidFile)
	child := waitPid(t, pidFile)
	if err := owner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := owner.Wait(); !errors.As(err, &exit) {
		t.Fatalf("owner: %v", err)
	}
	if !procfs.Gone(cliPid, 10*time.Second) {
		_ = syscall.Kill(cliPid, syscall.SIGKILL)
		t.Errorf("the CLI %d outlived the process that started it", cliPid)
	}
	// The CLI's plugins are not the kernel's to kill (they lead groups of their own): the
	// reaper the CLI runs under kills them.
	if !procfs.Gone(child, 10*time.Second) {
		_ = syscall.Kill(child, syscall.SIGKILL)
		t.Errorf("the CLI's plugin %d outlived the process that started the CLI", child)
	}
}
