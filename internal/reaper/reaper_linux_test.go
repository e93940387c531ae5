package reaper_test

import (
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
	"github.com/stackwright/stackwright/internal/reaper"
	"github.com/stackwright/stackwright/internal/testing/reapertest"
)

// starterEnv makes the test binary a starter: it runs the script the variable names under
// the reaper reaperEnv names, and waits to be killed.
const starterEnv, reaperEnv = "REAPER_TEST_STARTER", "REAPER_TEST_REAPER"

func TestMain(m *testing.M) {
	if script := os.Getenv(starterEnv); script != "" {
		reaper.Use(os.Getenv(reaperEnv))
		cmd := exec.Command("/bin/sh", script)
		reaper.Wrap(cmd)
		if err := cmd.Start(); err != nil {
			os.Exit(3)
		}
		_ = cmd.Wait()
		time.Sleep(time.Hour)
	}
	os.Exit(reapertest.Run(m))
}

// script writes a shell script that starts a process in a session (so a process group) of
// its own, as pulumi starts its plugins, writes that process's pid to the returned file,
// and then does then.
func script(t *testing.T, then string) (path, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	pidFile = filepath.Join(dir, "plugin.pid")
	path = filepath.Join(dir, "cli.sh")
	body := "setsid sh -c 'echo $$ > " + pidFile + ".tmp; mv " + pidFile + ".tmp " + pidFile + "; exec sleep 300' &\n" +
		"while [ ! -e " + pidFile + " ]; do sleep 0.05; done\n" + then + "\n"
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, pidFile
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared", path)
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("no pid in %s", path)
	return 0
}

func TestReaper_Wrap_NothingOutlivesTheCommand(t *testing.T) {
	tests := []struct {
		name string
		then string
		// signal is sent to the reaper once the command runs.
		signal     syscall.Signal
		wantCode   int
		wantSignal syscall.Signal
		// wantFile is written by the command when it handles SIGINT.
		wantFile bool
	}{
		{name: "exitsLeavingAPlugin", then: "exit 3", wantCode: 3},
		{name: "exitsCleanly", then: "exit 0"},
		{name: "killedBySignal", then: "kill -KILL $$", wantCode: -1, wantSignal: syscall.SIGKILL},
		{name: "interruptIsForwarded", then: "trap 'touch \"$0.int\"; exit 130' INT\ntouch \"$0.trapped\"\nwhile :; do sleep 0.05; done",
			signal: syscall.SIGINT, wantCode: 130, wantFile: true},
		{name: "terminateKillsAll", then: "trap '' INT TERM\ntouch \"$0.trapped\"\nwhile :; do sleep 0.05; done",
			signal: syscall.SIGTERM, wantCode: -1, wantSignal: syscall.SIGKILL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, pidFile := script(t, tt.then)
			cmd := exec.Command("/bin/sh", path)
			reaper.Wrap(cmd)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			plugin := readPid(t, pidFile)
			if tt.signal != 0 {
				// The trap must be set before the signal comes: the script says when.
				waitFile(t, path+".trapped")
				if err := cmd.Process.Signal(tt.signal); err != nil {
					t.Fatal(err)
				}
			}
			err := cmd.Wait()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatal(err)
			}
			if got := cmd.ProcessState.ExitCode(); got != tt.wantCode {
				t.Errorf("exit code %d, want %d (%v)", got, tt.wantCode, err)
			}
			status := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if tt.wantSignal != 0 && (!status.Signaled() || status.Signal() != tt.wantSignal) {
				t.Errorf("status %v, want killed by %v", cmd.ProcessState, tt.wantSignal)
			}
			if _, err := os.Stat(path + ".int"); (err == nil) != tt.wantFile {
				t.Errorf("the command handled SIGINT: %v, want %v", err == nil, tt.wantFile)
			}
			if !procfs.Gone(plugin, 10*time.Second) {
				_ = syscall.Kill(plugin, syscall.SIGKILL)
				t.Error("the plugin outlived the command")
			}
		})
	}
}

// TestReaper_Wrap_StarterKilledHard: a manager or runner SIGKILLed takes its CLI's plugins
// along, although nothing of it runs any more to kill them.
func TestReaper_Wrap_StarterKilledHard(t *testing.T) {
	path, pidFile := script(t, "exec sleep 300")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	starter := exec.Command(self, "-test.run=^$")
	starter.Env = append(os.Environ(), starterEnv+"="+path, reaperEnv+"="+reaper.Path())
	if err := starter.Start(); err != nil {
		t.Fatal(err)
	}
	plugin := readPid(t, pidFile)
	if err := starter.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = starter.Wait()
	if !procfs.Gone(plugin, 10*time.Second) {
		_ = syscall.Kill(plugin, syscall.SIGKILL)
		t.Fatal("the plugin outlived the manager that started its CLI")
	}
}

// TestReaper_Wrap_Disabled: without a reaper, a command runs as it is, leading its own
// group.
func TestReaper_Wrap_Disabled(t *testing.T) {
	saved := reaper.Path()
	reaper.Use("")
	t.Cleanup(func() { reaper.Use(saved) })
	cmd := exec.Command("/bin/true", "x")
	reaper.Wrap(cmd)
	if cmd.Path != "/bin/true" || len(cmd.Args) != 2 || cmd.Env != nil {
		t.Errorf("Wrap changed the command: %q %q %q", cmd.Path, cmd.Args, cmd.Env)
	}
	if cmd.SysProcAttr == nil || !cmd.SysProcAttr.Setpgid || cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL {
		t.Errorf("SysProcAttr %+v, want a group of its own and SIGKILL when the starter dies", cmd.SysProcAttr)
	}
}

// TestReaper_Locate_NextToTheBinary: the reaper installed next to the running binary is
// the one used, as in ./bin and the images.
func TestReaper_Locate_NextToTheBinary(t *testing.T) {
	saved := reaper.Path()
	t.Cleanup(func() { reaper.Use(saved) })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	next := filepath.Join(filepath.Dir(self), reaper.Name)
	if err := os.Symlink(saved, next); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(next) })
	got, err := reaper.Locate()
	if err != nil || got != next || reaper.Path() != next {
		t.Errorf("Locate() = %q, %v (Path %q); want %q", got, err, reaper.Path(), next)
	}
}
