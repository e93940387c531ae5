package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The CLI logs every invocation into PULUMI_HOME/logs and by default keeps a week or
// 500 MB of them; with BaseEnv a run leaves at most cliLogMaxTotalMB of the logs that
// were there before it, none older than cliLogMaxAgeDays, and the newest kept.
func TestBaseEnv_Run_BoundsTheCLIsLogDirectory(t *testing.T) {
	t.Parallel()
	f := newFixture(t, filesProgram)
	eng, err := New(Options{Bin: f.env.Bin, PulumiHome: f.env.Home, Env: BaseEnv()})
	if err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(f.env.Home, "logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		t.Fatal(err)
	}
	// Names as the CLI gives them (pulumi-<local time>-<pid>-<command>.log).
	now := time.Now()
	name := func(age time.Duration, i int) string {
		return fmt.Sprintf("pulumi-%s-%d-up.log", now.Add(-age).Format("20060102T150405"), 1000+i)
	}
	const mib = 1 << 20
	write := func(name string, size int) {
		if err := os.WriteFile(filepath.Join(logs, name), make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Two days old: within the CLI's default week, past BaseEnv's day.
	expired := name(48*time.Hour, 0)
	write(expired, 1024)
	// Twice the size bound, from the last hour, one MiB each, oldest first.
	var recent []string
	for i := range 2 * cliLogMaxTotalMB {
		n := name(time.Duration(2*cliLogMaxTotalMB-i)*time.Minute, i+1)
		write(n, mib)
		recent = append(recent, n)
	}

	r := f.request(OpPreview)
	if _, err := eng.Run(testContext(t), r); err != nil {
		t.Fatalf("preview failed: %v\n%s", err, f.log)
	}

	left := map[string]int64{}
	entries, err := os.ReadDir(logs)
	if err != nil {
		t.Fatal(err)
	}
	var kept int64
	own := 0
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		left[e.Name()] = info.Size()
		if e.Name() == expired || strings.HasSuffix(e.Name(), "-up.log") {
			kept += info.Size()
		} else {
			own++
		}
	}
	if _, ok := left[expired]; ok {
		t.Errorf("the two-day-old log is still there: %v", left)
	}
	if kept > cliLogMaxTotalMB*mib {
		t.Errorf("%d bytes of the earlier logs kept; want at most %d MiB", kept, cliLogMaxTotalMB)
	}
	if _, ok := left[recent[len(recent)-1]]; !ok {
		t.Errorf("the newest earlier log was deleted: %v", left)
	}
	// The run itself logged here: the CLI used this PULUMI_HOME.
	if own == 0 {
		t.Errorf("the run's CLI invocations left no log of their own: %v", left)
	}
}
