package engine

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRecoverable(t *testing.T) {
	t.Parallel()
	lost := []string{"web-1a2b3c4d5e-2", "web-1a2b3c4d5e-3"}
	entry := func(kind, result, runID string) historyEntry {
		return historyEntry{Version: 7, Kind: kind, Result: result, Message: "Stackwright: retrying (Stack default/web, generation 4) " + runTag(runID)}
	}
	tests := []struct {
		name    string
		entries []historyEntry
		want    string
	}{
		{name: "NoHistory"},
		{name: "LatestIsALostRunThatSucceeded", entries: []historyEntry{entry("update", "succeeded", lost[1])}, want: lost[1]},
		{name: "LatestIsAnEarlierLostRun", entries: []historyEntry{entry("update", "succeeded", lost[0]), entry("update", "failed", "web-1a2b3c4d5e-1")}, want: lost[0]},
		{name: "LatestLostRunFailed", entries: []historyEntry{entry("update", "failed", lost[1])}},
		{name: "LatestIsARefresh", entries: []historyEntry{entry("refresh", "succeeded", lost[1])}},
		{name: "LatestIsAnotherRun", entries: []historyEntry{entry("update", "succeeded", "web-1a2b3c4d5e-1"), entry("update", "succeeded", lost[1])}},
		{name: "LatestIsAPersonsUp", entries: []historyEntry{{Kind: "update", Result: "succeeded", Message: "hotfix"}, entry("update", "succeeded", lost[1])}},
		{name: "RunIDIsOnlyAPrefix", entries: []historyEntry{entry("update", "succeeded", lost[1]+"0")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := recoverable(tt.entries, lost)
			if ok != (tt.want != "") || got != tt.want {
				t.Errorf("recoverable() = %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}

// historyFiles counts the entries of the backend's history of the fixture's stack.
func (f *fixture) historyFiles() int {
	f.t.Helper()
	n := 0
	err := filepath.WalkDir(strings.TrimPrefix(f.env.Backend, "file://"), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(p, "/.pulumi/history/") && strings.HasSuffix(p, ".history.json") {
			n++
		}
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// An up whose caller lost an earlier run of it finds that run complete in the backend's
// history and reports it instead of applying the program again; a run the history does not
// end with is not recovered.
func TestEngine_Run_RecoversALostRunFromHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t, filesProgram)
	ctx := testContext(t)
	lost := f.request(OpUp)
	lost.RunID = "web-1a2b3c4d5e-1"
	first := f.mustRun(ctx, lost)
	if n := f.historyFiles(); n != 1 {
		t.Fatalf("history after the first up: %d entries; want 1", n)
	}

	// DIY backends do not number versions: the history says 0.
	retry := f.request(OpUp)
	retry.RunID, retry.Recover = "web-1a2b3c4d5e-2", []string{lost.RunID}
	got := f.mustRun(ctx, retry)
	if diff := cmp.Diff(&Recovered{RunID: lost.RunID}, got.Recovered); diff != "" {
		t.Errorf("Recovered (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(first.Changes, got.Changes); diff != "" {
		t.Errorf("recovered changes are not the lost run's (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(first.Outputs, got.Outputs); diff != "" {
		t.Errorf("recovered outputs (-want +got):\n%s", diff)
	}
	if !strings.Contains(got.Message, "not run again") {
		t.Errorf("message %q does not say the run was recovered", got.Message)
	}
	if n := f.historyFiles(); n != 1 {
		t.Errorf("history after the recovering up: %d entries; want 1 (the program applied once)", n)
	}

	// The history now ends with that run; an up that lost another run applies the program.
	other := f.request(OpUp)
	other.RunID, other.Recover = "web-1a2b3c4d5e-3", []string{"web-9f8e7d6c5b-1"}
	if res := f.mustRun(ctx, other); res.Recovered != nil {
		t.Errorf("up recovered %+v, a run the history does not end with", res.Recovered)
	}
	again := f.request(OpUp)
	again.RunID, again.Recover = "web-1a2b3c4d5e-4", []string{lost.RunID}
	if res := f.mustRun(ctx, again); res.Recovered != nil {
		t.Errorf("up recovered %+v, though a later run followed it", res.Recovered)
	}
	if n := f.historyFiles(); n != 3 {
		t.Errorf("history: %d entries; want 3", n)
	}
}

func TestPendingOperations(t *testing.T) {
	t.Parallel()
	const warning = `Diagnostics:
  pulumi:pulumi:Stack (po-dev):
    warning: Attempting to deploy or update resources with 2 pending operations from previous deployment.
      * urn:pulumi:dev::po::stackwright-testing:index:Sleep::nap, interrupted while creating
      * urn:pulumi:dev::po::stackwright-testing:index:File::a, interrupted while updating
    These resources are in an unknown state because the Pulumi CLI was interrupted while waiting for changes to these resources
`
	tests := []struct {
		name   string
		stdout string
		want   []string
	}{
		{name: "NoWarning", stdout: "Resources:\n    + 1 created\n      * urn:pulumi:dev::po::x:y:Z::n, interrupted while creating\n"},
		{name: "Listed", stdout: warning, want: []string{
			"urn:pulumi:dev::po::stackwright-testing:index:Sleep::nap (interrupted while creating)",
			"urn:pulumi:dev::po::stackwright-testing:index:File::a (interrupted while updating)",
		}},
		{name: "RepeatedOnce", stdout: warning + warning, want: []string{
			"urn:pulumi:dev::po::stackwright-testing:index:Sleep::nap (interrupted while creating)",
			"urn:pulumi:dev::po::stackwright-testing:index:File::a (interrupted while updating)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, pendingOperations(tt.stdout)); diff != "" {
				t.Errorf("pendingOperations (-want +got):\n%s", diff)
			}
		})
	}
}

// killCLI SIGKILLs the pulumi processes working in dir, as a crash of their caller would
// end them, and waits for them to go.
func killCLI(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if cwd == dir && strings.TrimSpace(string(comm)) == "pulumi" {
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				killed++
			}
		}
	}
	if killed == 0 {
		t.Fatalf("no pulumi process works in %s", dir)
	}
}

// An update killed while it creates a resource leaves a pending create in the state. The
// next up goes ahead (healing the dead process's lock) and reports the pending operation,
// which Pulumi keeps until a person clears it.
func TestEngine_Run_KilledUpLeavesPendingCreateReported(t *testing.T) {
	t.Parallel()
	f := newFixture(t, sleepProgram)
	ctx := testContext(t)
	done := make(chan error, 1)
	go func() {
		_, err := f.eng.Run(ctx, f.request(OpUp))
		done <- err
	}()
	waitForLog(t, f.log, "Sleep", "nap", "creating")
	killCLI(t, f.work)
	if err := <-done; err == nil {
		t.Fatal("the killed up succeeded")
	}

	f.work = f.workDir(strings.Replace(sleepProgram, "seconds: 30", "seconds: 0", 1))
	retry := f.request(OpUp)
	retry.StaleLocalLocks = true
	res := f.mustRun(ctx, retry)
	want := []string{"urn:pulumi:dev::sleeper::stackwright-testing:index:Sleep::nap (interrupted while creating)"}
	if diff := cmp.Diff(want, res.PendingOperations); diff != "" {
		t.Errorf("pending operations (-want +got):\n%s", diff)
	}
}
