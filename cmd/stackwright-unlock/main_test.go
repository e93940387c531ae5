package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
)

func TestLockKey_LockURL_OnlyLocksOfTheBackend(t *testing.T) {
	t.Parallel()
	const lock = ".pulumi/locks/organization/p/dev/6f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0.json"
	tests := []struct {
		name    string
		backend string
		lock    string
		want    string // "" when refused
	}{
		{name: "s3Lock", backend: "s3://state?region=eu-west-1", lock: "s3://state/" + lock + "?region=eu-west-1", want: lock},
		{name: "gsLockBelowPrefix", backend: "gs://state/team-a", lock: "gs://state/team-a/" + lock, want: lock},
		{name: "azblobLockWithQuery", backend: "azblob://state?localemu=true&domain=127.0.0.1:1&protocol=http", lock: "azblob://state/" + lock + "?localemu=true&domain=127.0.0.1:1&protocol=http", want: lock},
		{name: "prefixWithSlashes", backend: "s3://state/a/b/", lock: "s3://state/a/b/" + lock, want: lock},
		{name: "otherBucket", backend: "s3://state", lock: "s3://other/" + lock},
		{name: "otherScheme", backend: "s3://state", lock: "gs://state/" + lock},
		{name: "outsideThePrefix", backend: "gs://state/team-a", lock: "gs://state/team-b/" + lock},
		{name: "prefixIsNotAPathSegment", backend: "gs://state/team", lock: "gs://state/team-a/" + lock},
		{name: "stackStateIsNotALock", backend: "s3://state", lock: "s3://state/.pulumi/stacks/p/dev.json"},
		{name: "notJSON", backend: "s3://state", lock: "s3://state/.pulumi/locks/organization/p/dev/x.txt"},
		{name: "escapesTheLockDirectory", backend: "s3://state", lock: "s3://state/.pulumi/locks/../stacks/p/dev.json"},
		{name: "fileBackend", backend: "file:///var/state", lock: "file:///var/state/" + lock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := url.Parse(tt.backend)
			if err != nil {
				t.Fatal(err)
			}
			got, err := lockKey(b, tt.lock)
			if tt.want == "" {
				if err == nil {
					t.Errorf("lockKey(%s, %s) = %q; want an error", tt.backend, tt.lock, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("lockKey(%s, %s) = %q, %v; want %q", tt.backend, tt.lock, got, err, tt.want)
			}
		})
	}
}

// One lock that is not the backend's refuses the whole list before any bucket is opened
// (the backend here could not be reached).
func TestUnlock_OneForeignLock_DeletesNothing(t *testing.T) {
	t.Parallel()
	backend := "s3://state?endpoint=http://127.0.0.1:1&region=us-east-1"
	err := unlock(context.Background(), backend, []string{
		"s3://state/.pulumi/locks/organization/p/dev/a.json",
		"s3://state/.pulumi/stacks/p/dev.json",
	})
	if err == nil || !strings.Contains(err.Error(), "is not a lock of the backend") {
		t.Errorf("unlock = %v; want the stack's state refused", err)
	}
}
