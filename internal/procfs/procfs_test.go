package procfs

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseStat_CommWithSpacesAndParens(t *testing.T) {
	// Fields 14-17 (utime stime cutime cstime) are 250 50 1000 200 ticks.
	line := "4242 (my (odd) cmd) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 50 1000 200 20 0 12 0 300 1000000 2000 18446744073709551615\n"
	got, err := ParseStat([]byte(line), 100)
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{PID: 4242, PPID: 17, Comm: "my (odd) cmd", State: "S", CPU: 3 * time.Second, ChildrenCPU: 12 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseStat (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "12 no parens", "12 (x) S 1 2"} {
		if _, err := ParseStat([]byte(bad), 100); err == nil {
			t.Errorf("ParseStat(%q) = nil error; want one", bad)
		}
	}
}

func TestParseStatusMemory_RSSAndHWM(t *testing.T) {
	status := "Name:\tstackwright\nVmPeak:\t 2000 kB\nVmHWM:\t   81920 kB\nVmRSS:\t   40960 kB\nThreads:\t12\n"
	rss, hwm, err := ParseStatusMemory([]byte(status))
	if err != nil {
		t.Fatal(err)
	}
	if rss != 40960<<10 || hwm != 81920<<10 {
		t.Errorf("ParseStatusMemory = %d, %d; want %d, %d", rss, hwm, 40960<<10, 81920<<10)
	}
	if _, _, err := ParseStatusMemory([]byte("Name:\tzombie\nState:\tZ\n")); err == nil {
		t.Error("ParseStatusMemory without Vm lines = nil error; want one")
	}
}

func TestChildren_ByCommandName(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if diff := cmp.Diff([]int{cmd.Process.Pid}, Children(os.Getpid(), "sleep")); diff != "" {
		t.Errorf("Children(self, sleep) (-want +got):\n%s", diff)
	}
	if got := Children(os.Getpid(), "no-such-command"); len(got) != 0 {
		t.Errorf("Children(self, no-such-command) = %v; want none", got)
	}
	if got := Children(cmd.Process.Pid, "sleep"); len(got) != 0 {
		t.Errorf("Children(sleep, sleep) = %v; want none: sleep has no children", got)
	}
}
