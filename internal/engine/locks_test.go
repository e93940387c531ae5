package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClearStaleLocks_OnlyProvenGoneHolders(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, ".pulumi", "locks", "organization", "proj", "dev")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, host := range map[string]string{
		"dead.json":  "web-abc-1-5f2e9a1b-x7k2p",
		"alive.json": "web-abc-2-0c1d2e3f-q9w8e",
		"other.json": "manager-6d4f",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(`{"pid":12,"username":"nonroot","hostname":"`+host+`"}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		url     string
		hosts   []string
		removed []string
	}{
		{name: "s3 backend untouched", url: "s3://bucket", hosts: []string{"web-abc-1-5f2e9a1b-"}},
		{name: "no proven holder", url: "file://" + root},
		{name: "dead runner's lock removed", url: "file://" + root, hosts: []string{"web-abc-1-5f2e9a1b-"}, removed: []string{".pulumi/locks/organization/proj/dev/dead.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ClearStaleLocks(tc.url, tc.hosts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.removed, got); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
		})
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(left) != 2 {
		t.Errorf("locks left: %v; want alive.json and other.json", left)
	}
}
