package bench

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func TestRunnerPID(t *testing.T) {
	for _, tt := range []struct {
		runner string
		pid    int
		ok     bool
	}{
		{"local/host-1/4242/abcdef", 4242, true},
		{"job/stack-00001-run", 0, false},
		{"local/host/notapid/abc", 0, false},
		{"", 0, false},
	} {
		pid, ok := runnerPID(tt.runner)
		if pid != tt.pid || ok != tt.ok {
			t.Errorf("runnerPID(%q) = %d, %t; want %d, %t", tt.runner, pid, ok, tt.pid, tt.ok)
		}
	}
}

// The two selectors split every Stack, labelled or not, between exactly one shard each,
// and shardOf labels half of a fleet each way.
func TestShardSelectors_AreComplementary(t *testing.T) {
	var sels []labels.Selector
	for _, s := range shardSelectors {
		sel, err := labels.Parse(s[1])
		if err != nil {
			t.Fatalf("selector %q: %v", s[1], err)
		}
		sels = append(sels, sel)
	}
	for _, set := range []labels.Set{{shardLabel: "a"}, {shardLabel: "b"}, {shardLabel: "c"}, {}} {
		n := 0
		for _, sel := range sels {
			if sel.Matches(set) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("labels %v match %d shards, want 1", set, n)
		}
	}
	count := map[string]int{}
	for i := range 2000 {
		count[shardOf(i)]++
	}
	if count["a"] != 1000 || count["b"] != 1000 {
		t.Errorf("shardOf splits 2000 as %v", count)
	}
}
