package provider

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

func TestSleep_Create_SleepsAndReportsDuration(t *testing.T) {
	t.Parallel()
	start := time.Now()
	resp, err := (&Sleep{}).Create(t.Context(), infer.CreateRequest[SleepArgs]{
		Name: "s", Inputs: SleepArgs{Seconds: 0.2, Value: "v"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed < 200*time.Millisecond {
		t.Errorf("returned after %v, want >= 200ms", elapsed)
	}
	want := SleepState{Seconds: 0.2, Value: "v", SleptSeconds: 0.2}
	if diff := cmp.Diff(want, resp.Output); diff != "" {
		t.Errorf("state mismatch (-want +got):\n%s", diff)
	}
}

func TestSleep_Update_ReturnsEarlyWhenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := (&Sleep{}).Update(ctx, infer.UpdateRequest[SleepArgs, SleepState]{Inputs: SleepArgs{Seconds: 60}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Update error = %v, want context.DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("cancelled sleep took %v", elapsed)
	}
}

func TestSleep_Create_DryRunDoesNotSleep(t *testing.T) {
	t.Parallel()
	start := time.Now()
	if _, err := (&Sleep{}).Create(t.Context(), infer.CreateRequest[SleepArgs]{
		Inputs: SleepArgs{Seconds: 60}, DryRun: true,
	}); err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("preview slept for %v", elapsed)
	}
}

func TestSleep_Check_RejectsNegativeSeconds(t *testing.T) {
	t.Parallel()
	resp, err := (&Sleep{}).Check(t.Context(), checkRequest(map[string]property.Value{"seconds": property.New(-0.5)}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"seconds"}, failedProperties(resp.Failures)); diff != "" {
		t.Errorf("failures mismatch (-want +got):\n%s", diff)
	}
}
