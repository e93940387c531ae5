package memcg_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stackwright/stackwright/internal/memcg"
	"github.com/stackwright/stackwright/internal/testing/memcgtest"
)

// The test binary doubles as the processes of the real OOM test: helperEnv says which.
const (
	helperEnv = "STACKWRIGHT_MEMCG_HELPER"
	// helperCgroup is the cgroup the watching helper moves itself into.
	helperCgroup = "STACKWRIGHT_MEMCG_CGROUP"
	// hogMebibytes is what the hog allocates: far past the test's limit.
	hogMebibytes = 1024
	testLimit    = 64 << 20
)

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "watch":
		os.Exit(watchHelper())
	case "hog":
		os.Exit(hogHelper())
	}
	os.Exit(m.Run())
}

// watched is what the watching helper reports.
type watched struct {
	Kills     uint64
	Memory    memcg.Memory
	Err       string
	HogSignal string
}

// watchHelper is a runner in miniature: it joins the test's cgroup, watches it, runs a
// child that allocates past its limit (the provider plugin of a real run), and reports
// what the watch saw once the child is gone.
func watchHelper() int {
	if err := memcgtest.Join(os.Getenv(helperCgroup)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w := memcg.Reader{}.Watch()
	hog := exec.Command(os.Args[0])
	hog.Env = append(os.Environ(), helperEnv+"=hog")
	hog.Stderr = os.Stderr
	var out watched
	err := hog.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.HogSignal = ws.Signal().String()
		}
	}
	kills, m, err := w.Kills()
	out.Kills, out.Memory = kills, m
	if err != nil {
		out.Err = err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return 2
	}
	return 0
}

// hogHelper allocates and touches hogMebibytes, then waits to be killed.
func hogHelper() int {
	page := os.Getpagesize()
	var held [][]byte
	for range hogMebibytes {
		chunk := make([]byte, 1<<20)
		for i := 0; i < len(chunk); i += page {
			chunk[i] = 1
		}
		held = append(held, chunk)
	}
	fmt.Fprintf(os.Stderr, "hog: held %d MiB and was not killed\n", len(held))
	return 3
}

// A process of a real memory cgroup v1 that allocates past the cgroup's limit is killed
// by the kernel's OOM killer, and a Watch started in that cgroup before counts the kill
// and names the limit: what a runner Pod's runner sees when its provider plugin runs out
// of memory. Needs root and cgroup v1 (this machine's); skipped elsewhere.
func TestWatch_Kills_RealOOMKillInCgroupV1(t *testing.T) {
	dir := memcgtest.NewV1(t, testLimit)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=watch", helperCgroup+"="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("watching helper failed: %v\n%s", err, stderr.String())
	}
	var got watched
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("failed to decode helper's report %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	if got.Err != "" {
		t.Fatalf("watch failed: %s", got.Err)
	}
	if got.HogSignal != syscall.SIGKILL.String() {
		t.Errorf("hog ended by signal %q; want %q (the OOM killer's)\n%s", got.HogSignal, syscall.SIGKILL, stderr.String())
	}
	if got.Kills < 1 {
		t.Errorf("watch counted %d OOM kills; want at least 1", got.Kills)
	}
	if got.Memory.Version != 1 || got.Memory.Dir != dir || got.Memory.Limit != testLimit {
		t.Errorf("watch read %+v; want version 1, cgroup %s, limit %d", got.Memory, dir, testLimit)
	}
}
