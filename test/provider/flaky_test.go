package provider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

func TestFlaky_Outcome_FailsUntilCounterExceedsFailures(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		attempt, failures int
		wantErr           string
	}{
		"first of two fails":   {1, 2, "flaky: induced failure 1 of 2"},
		"second of two fails":  {2, 2, "flaky: induced failure 2 of 2"},
		"third of two passes":  {3, 2, ""},
		"zero failures passes": {1, 0, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := flakyOutcome(tc.attempt, tc.failures)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("flakyOutcome(%d, %d) = %q, want %q", tc.attempt, tc.failures, got, tc.wantErr)
			}
		})
	}
}

func TestFlaky_IncrementCounter_CreatesMissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "nested", "counter")
	for want := 1; want <= 3; want++ {
		got, err := incrementCounter(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("incrementCounter = %d, want %d", got, want)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(data)) != "3" {
		t.Errorf("counter file holds %q, want 3", data)
	}
}

func TestFlaky_IncrementCounter_RejectsGarbage(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "counter")
	if err := os.WriteFile(path, []byte("nope"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := incrementCounter(path); err == nil {
		t.Fatal("incrementCounter succeeded on a non-integer counter")
	}
}

func TestFlaky_Create_FailsThenSucceeds(t *testing.T) {
	root := t.TempDir()
	t.Setenv(RootEnvVar, root)
	args := FlakyArgs{Failures: 2, CounterFile: "flaky/count", Value: "v"}

	var errs []string
	var state FlakyState
	for range 3 {
		resp, err := (&Flaky{}).Create(t.Context(), infer.CreateRequest[FlakyArgs]{Name: "f", Inputs: args})
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		state = resp.Output
	}
	wantErrs := []string{"flaky: induced failure 1 of 2", "flaky: induced failure 2 of 2"}
	if diff := cmp.Diff(wantErrs, errs); diff != "" {
		t.Errorf("errors mismatch (-want +got):\n%s", diff)
	}
	want := FlakyState{Failures: 2, CounterFile: "flaky/count", Value: "v", Attempts: 3}
	if diff := cmp.Diff(want, state); diff != "" {
		t.Errorf("state mismatch (-want +got):\n%s", diff)
	}
}

func TestFlaky_Create_DryRunDoesNotCount(t *testing.T) {
	root := t.TempDir()
	t.Setenv(RootEnvVar, root)
	args := FlakyArgs{Failures: 1, CounterFile: "count"}
	if _, err := (&Flaky{}).Create(t.Context(), infer.CreateRequest[FlakyArgs]{Inputs: args, DryRun: true}); err != nil {
		t.Fatalf("preview failed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "count")); !os.IsNotExist(err) {
		t.Errorf("preview touched the counter file: stat err = %v", err)
	}
}

func TestFlaky_Check_RejectsNegativeFailuresAndEscapingCounter(t *testing.T) {
	t.Parallel()
	resp, err := (&Flaky{}).Check(t.Context(), checkRequest(map[string]property.Value{
		"failures":    property.New(-1.0),
		"counterFile": property.New("../c"),
	}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"failures", "counterFile"}, failedProperties(resp.Failures)); diff != "" {
		t.Errorf("failures mismatch (-want +got):\n%s", diff)
	}
}

func TestFlaky_Delete_FailsThenSucceedsWithSeparateCounter(t *testing.T) {
	root := t.TempDir()
	t.Setenv(RootEnvVar, root)
	state := FlakyState{FailDeletes: 1, CounterFile: "flaky/count"}

	var errs []string
	for range 2 {
		if _, err := (&Flaky{}).Delete(t.Context(), infer.DeleteRequest[FlakyState]{ID: "flaky/count", State: state}); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if diff := cmp.Diff([]string{"flaky: induced failure 1 of 1"}, errs); diff != "" {
		t.Errorf("errors mismatch (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(root, "flaky", "count")); err == nil {
		t.Errorf("deletes bumped the create/update counter; they must count separately")
	}
}
