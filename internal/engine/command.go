package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/blang/semver"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"

	"github.com/stackwright/stackwright/internal/crashpoint"
	"github.com/stackwright/stackwright/internal/reaper"
)

// DefaultInheritEnv is what a run takes from the environment of the process that starts
// it: where programs are found, a home and a temporary directory, and the system's CA
// bundle. Credentials, tokens and everything else of the manager's (or runner's) own
// environment stay out; a Stack passes what its program needs through envRefs.
var DefaultInheritEnv = []string{"PATH", "HOME", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR"}

// The CLI writes a log of every invocation into PULUMI_HOME/logs and, before each, lists
// that whole directory to delete what is older than 7 days or past 500 MB. A manager's
// PULUMI_HOME (on its data volume) is shared by every Stack it runs: thousands of
// invocations a day would keep tens of thousands of files there, every invocation
// scanning them all. Each run's output is kept in its Update instead; these logs only
// serve Pulumi's own support tooling, so a day and a few megabytes of them are enough.
const (
	cliLogMaxAgeDays = 1
	cliLogMaxTotalMB = 8
)

// BaseEnv is the environment every run of a manager or runner starts from: no update
// checks; no plugin downloads (plugins come from the image, or ./bin, and nothing
// downloads code because a program asked for it); the CLI's own logs bounded.
func BaseEnv() map[string]string {
	return map[string]string{
		"PULUMI_SKIP_UPDATE_CHECK":                    "true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
		"PULUMI_LOG_ROTATION_MAX_AGE_DAYS":            strconv.Itoa(cliLogMaxAgeDays),
		"PULUMI_LOG_ROTATION_MAX_TOTAL_MB":            strconv.Itoa(cliLogMaxTotalMB),
	}
}

// hardStop is how long a cancelled CLI has to stop by itself.
const hardStop = 10 * time.Second

// command runs the pulumi CLI with the allow-listed part of this process's environment
// only; the Automation API's own would start it with the whole of it (os.Environ).
type command struct {
	path    string
	inherit []string
	version semver.Version // zero when unchecked
}

var _ auto.PulumiCommand = command{}

// Version is the CLI's version as New checked it.
func (c command) Version() semver.Version { return c.version }

func (c command) Run(ctx context.Context, workdir string, stdin io.Reader,
	out, errOut []io.Writer, env []string, args ...string,
) (string, string, int, error) {
	stdout, stderr, code, _, err := c.run(ctx, workdir, stdin, out, errOut, env, args...)
	return stdout, stderr, code, err
}

// run is Run that also returns the CPU the process used, with its waited-for descendants
// (language host, providers).
func (c command) run(ctx context.Context, workdir string, stdin io.Reader,
	out, errOut []io.Writer, env []string, args ...string,
) (string, string, int, time.Duration, error) {
	args = slices.Clone(args)
	end := slices.Index(args, "--")
	if end < 0 {
		end = len(args)
	}
	if !slices.Contains(args[:end], "--non-interactive") {
		args = slices.Insert(args, end, "--non-interactive")
	}
	cmd := exec.CommandContext(ctx, c.path, args...)
	cmd.Dir = workdir
	cmd.Env = append(c.base(), env...)
	cmd.Env = append(cmd.Env, "PULUMI_AUTOMATION_API=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdin = stdin
	// SIGINT lets the CLI cancel cleanly and release its lock. A CLI that ignores it gets
	// SIGTERM after hardStop, which has its reaper kill it and every plugin at once; exec
	// kills whatever still runs (SIGKILL) after WaitDelay.
	cmd.Cancel = func() error {
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			_ = cmd.Process.Kill()
		} else {
			time.AfterFunc(hardStop, func() { _ = cmd.Process.Signal(syscall.SIGTERM) })
		}
		return nil
	}
	cmd.WaitDelay = hardStop + 5*time.Second
	reaper.Wrap(cmd)
	code := -2 // the Automation API's "unknown"
	err := runReading(cmd, io.MultiWriter(append(out, &stdout)...), io.MultiWriter(append(errOut, &stderr)...))
	var exit *exec.ExitError
	switch {
	case err == nil:
		code = 0
	case errors.As(err, &exit):
		code = exit.ExitCode()
	}
	return stdout.String(), stderr.String(), code, processCPU(cmd.ProcessState), err
}

// runReading runs cmd with its output copied to stdout and stderr, and returns once the CLI
// has exited and its process group is gone. The pipes are the caller's, not exec's, so
// that Wait returns when the CLI exits: exec's own would also wait for any plugin still
// holding them, which killGroup is about to kill.
func runReading(cmd *exec.Cmd, stdout, stderr io.Writer) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("failed to create pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_, _ = outR.Close(), outW.Close()
		return fmt.Errorf("failed to create pipe: %w", err)
	}
	defer func() { _, _ = outR.Close(), errR.Close() }()
	cmd.Stdout, cmd.Stderr = outW, errW
	var copiers sync.WaitGroup
	copiers.Go(func() { _, _ = io.Copy(stdout, outR) })
	copiers.Go(func() { _, _ = io.Copy(stderr, errR) })
	err = cmd.Start()
	// The CLI has its own copies of the write ends now (or never will).
	_, _ = outW.Close(), errW.Close()
	if err == nil {
		crashpoint.Hit(crashpoint.EngineCLIStarted)
		err = cmd.Wait()
		killGroup(cmd)
	}
	copied := make(chan struct{})
	go func() { copiers.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(cmd.WaitDelay):
		// A process that left the group still holds a pipe: stop reading from it.
		_, _ = outR.Close(), errR.Close()
		<-copied
	}
	return err
}

// processCPU is the user and system CPU of a finished process and of the descendants it
// waited for (wait4 reports both).
func processCPU(ps *os.ProcessState) time.Duration {
	if ps == nil {
		return 0
	}
	return ps.UserTime() + ps.SystemTime()
}

// base is the allow-listed part of this process's environment.
func (c command) base() []string {
	names := c.inherit
	if names == nil {
		names = DefaultInheritEnv
	}
	env := make([]string, 0, len(names))
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			env = append(env, n+"="+v)
		}
	}
	return env
}
