package provider

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// rss is this process's resident memory, from /proc/self/statm.
func rss(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("no /proc/self/statm: %v", err)
	}
	fields := strings.Fields(string(b))
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		t.Fatalf("failed to parse /proc/self/statm %q: %v", b, err)
	}
	return pages * int64(os.Getpagesize())
}

// Not parallel: it measures the process's resident memory, which other tests would move.
func TestHog_Allocate_TouchesEveryPage(t *testing.T) {
	before := rss(t)
	held, err := allocate(t.Context(), 64)
	if err != nil {
		t.Fatal(err)
	}
	grown := rss(t) - before
	if len(held) != 64 {
		t.Fatalf("allocate held %d MiB, want 64", len(held))
	}
	// Allocated but untouched memory is not resident: only writes make it count against a
	// limit. Some slack for what the runtime had already mapped and reused.
	if grown < 56*mebibyte {
		t.Errorf("resident memory grew by %d MiB, want about 64", grown/mebibyte)
	}
	page := os.Getpagesize()
	for i, chunk := range held {
		for j := 0; j < len(chunk); j += page {
			if chunk[j] != 1 {
				t.Fatalf("MiB %d, byte %d was not written", i, j)
			}
		}
	}
	release(&held)
	if held != nil {
		t.Error("release kept the memory referenced")
	}
	if left := rss(t) - before; left > 16*mebibyte {
		t.Errorf("resident memory still %d MiB above where it started after release", left/mebibyte)
	}
}

// Not parallel: it measures the process's resident memory, which other tests would move.
func TestHog_Create_HoldsThenReleases(t *testing.T) {
	before := rss(t)
	start := time.Now()
	resp, err := (&Hog{}).Create(t.Context(), infer.CreateRequest[HogArgs]{
		Name: "h", Inputs: HogArgs{Mebibytes: 32, HoldSeconds: 0.2, Value: "v"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed < 200*time.Millisecond {
		t.Errorf("returned after %v, want >= 200ms", elapsed)
	}
	want := HogState{Mebibytes: 32, HoldSeconds: 0.2, Value: "v", HeldMebibytes: 32}
	if diff := cmp.Diff(want, resp.Output); diff != "" {
		t.Errorf("state mismatch (-want +got):\n%s", diff)
	}
	if left := rss(t) - before; left > 16*mebibyte {
		t.Errorf("resident memory still %d MiB above where it started: the hog kept its memory", left/mebibyte)
	}
}

func TestHog_Update_ReturnsEarlyWhenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := (&Hog{}).Update(ctx, infer.UpdateRequest[HogArgs, HogState]{Inputs: HogArgs{Mebibytes: 1, HoldSeconds: 60}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Update error = %v, want context.DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("cancelled hog took %v", elapsed)
	}
}

func TestHog_Create_DryRunAllocatesNothing(t *testing.T) {
	t.Parallel()
	start := time.Now()
	resp, err := (&Hog{}).Create(t.Context(), infer.CreateRequest[HogArgs]{
		Inputs: HogArgs{Mebibytes: maxHogMebibytes, HoldSeconds: 60}, DryRun: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("preview held memory for %v", elapsed)
	}
	if resp.Output.HeldMebibytes != 0 {
		t.Errorf("preview reports %d MiB held, want 0", resp.Output.HeldMebibytes)
	}
}

func TestHog_Check_BoundsInputs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		inputs   map[string]property.Value
		want     []string
		wantHold float64
	}{
		{name: "defaultHold", inputs: map[string]property.Value{"mebibytes": property.New(512.0)}, wantHold: defaultHoldSeconds},
		{name: "givenHold", inputs: map[string]property.Value{"mebibytes": property.New(0.0), "holdSeconds": property.New(0.5)}, wantHold: 0.5},
		{name: "negativeMebibytes", inputs: map[string]property.Value{"mebibytes": property.New(-1.0)}, want: []string{"mebibytes"}},
		{name: "tooManyMebibytes", inputs: map[string]property.Value{"mebibytes": property.New(float64(maxHogMebibytes + 1))}, want: []string{"mebibytes"}},
		{name: "negativeHold", inputs: map[string]property.Value{"mebibytes": property.New(1.0), "holdSeconds": property.New(-1.0)}, want: []string{"holdSeconds"}},
		{name: "unknownMebibytes", inputs: map[string]property.Value{"mebibytes": property.New(property.Computed)}, wantHold: defaultHoldSeconds},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, err := (&Hog{}).Check(t.Context(), checkRequest(tt.inputs))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, failedProperties(resp.Failures)); diff != "" {
				t.Errorf("failures mismatch (-want +got):\n%s", diff)
			}
			if tt.want == nil && resp.Inputs.HoldSeconds != tt.wantHold {
				t.Errorf("holdSeconds = %v, want %v", resp.Inputs.HoldSeconds, tt.wantHold)
			}
		})
	}
}
