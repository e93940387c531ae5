package artifact

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStore_Collect_RemovesOnlyUnclaimedAndUnused(t *testing.T) {
	const retention = time.Hour
	// Each artifact is put, made as old as lastUse, then possibly used again.
	tests := []struct {
		name    string
		lastUse time.Duration
		claimed bool
		use     func(t *testing.T, s *Store, digest string)
		removed bool
	}{
		{name: "unclaimedAndOldIsRemoved", lastUse: 2 * retention, removed: true},
		{name: "claimedIsKeptWhateverItsAge", lastUse: 100 * retention, claimed: true},
		{name: "unclaimedButRecentIsKept", lastUse: retention / 2},
		{name: "hasRenewsAnOldArtifact", lastUse: 2 * retention, use: func(_ *testing.T, s *Store, d string) { s.Has(d) }},
		{name: "putOfTheSameContentRenewsIt", lastUse: 2 * retention, use: func(t *testing.T, s *Store, _ string) {
			if _, err := s.Put(bytes.NewReader([]byte("putOfTheSameContentRenewsIt")), 1<<20); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "openRenewsIt", lastUse: 2 * retention, use: func(t *testing.T, s *Store, d string) {
			rc, err := s.Open(d)
			if err != nil {
				t.Fatal(err)
			}
			_ = rc.Close()
		}},
	}
	s := newStore(t)
	claimed := map[string]bool{}
	want := map[string]bool{}
	for _, tt := range tests {
		// The content is the case's name: Put of the same content is Put of the name.
		content := []byte(tt.name)
		d, err := s.Put(bytes.NewReader(content), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-tt.lastUse)
		if err := os.Chtimes(filepath.Join(s.Dir(), RelPath(d)), old, old); err != nil {
			t.Fatal(err)
		}
		if tt.use != nil {
			tt.use(t, s, d)
		}
		claimed[d] = tt.claimed
		want[tt.name] = !tt.removed
	}
	removed, freed, err := s.Collect(func(d string) bool { return claimed[d] }, retention)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, tt := range tests {
		got[tt.name] = s.Has(Digest([]byte(tt.name)))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("artifacts present after Collect (-want +got):\n%s", diff)
	}
	if removed != 1 || freed != int64(len("unclaimedAndOldIsRemoved")) {
		t.Errorf("Collect() = %d removed, %d bytes freed; want 1, %d", removed, freed, len("unclaimedAndOldIsRemoved"))
	}
}

// A reader that opened an artifact before Collect removed it still reads all of it.
func TestStore_Collect_OpenReaderKeepsItsContent(t *testing.T) {
	s := newStore(t)
	content := bytes.Repeat([]byte("x"), 1<<16)
	d, err := s.Put(bytes.NewReader(content), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := s.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	if removed, _, err := s.Collect(func(string) bool { return false }, -time.Hour); err != nil || removed != 1 {
		t.Fatalf("Collect() = %d, %v; want the artifact removed", removed, err)
	}
	got, err := io.ReadAll(rc)
	if err != nil || !slices.Equal(got, content) {
		t.Errorf("reading after removal: %d bytes, %v; want all %d", len(got), err, len(content))
	}
	if s.Has(d) {
		t.Error("the artifact is still in the store")
	}
}
