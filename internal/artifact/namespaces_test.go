package artifact

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// A namespace whose Stacks use its share of the store is refused new artifacts, naming the
// flag, while another namespace is not; an artifact two namespaces use counts against
// both; one the collector removed stops counting.
func TestStore_Admit_NamespaceShare(t *testing.T) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.SetNamespaceLimit(1500, time.Hour)
	put := func(content string) string {
		d, err := s.Put(strings.NewReader(content), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	big := put(string(bytes.Repeat([]byte("a"), 1000)))
	other := put(string(bytes.Repeat([]byte("b"), 1000)))

	s.Attribute("team-a", big)
	if err := s.Admit("team-a"); err != nil {
		t.Fatalf("Admit under the share = %v", err)
	}
	s.Attribute("team-a", other)
	s.Attribute("team-b", other)
	err = s.Admit("team-a")
	if !errors.Is(err, ErrNamespaceFull) || !strings.Contains(err.Error(), `namespace "team-a"`) || !strings.Contains(err.Error(), "--"+FlagMaxNamespaceBytes) {
		t.Fatalf("Admit over the share = %v; want ErrNamespaceFull naming the namespace and the flag", err)
	}
	if err := s.Admit("team-b"); err != nil {
		t.Errorf("another namespace refused: %v", err)
	}
	if got := s.namespaceUsage("team-b"); got != 1000 {
		t.Errorf("team-b uses %d bytes; want the shared artifact in full, 1000", got)
	}

	removed, _, err := s.Collect(func(d string) bool { return d == big }, -time.Second)
	if err != nil || removed != 1 {
		t.Fatalf("Collect = %d, %v; want the unclaimed artifact removed", removed, err)
	}
	if err := s.Admit("team-a"); err != nil {
		t.Errorf("Admit after the collector removed an artifact = %v", err)
	}
}

// Use older than the window stops counting; no limit admits everything.
func TestStore_Admit_WindowAndNoLimit(t *testing.T) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Put(strings.NewReader(strings.Repeat("x", 100)), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	s.Attribute("team-a", d) // no limit yet: nothing recorded
	if err := s.Admit("team-a"); err != nil {
		t.Fatalf("Admit without a limit = %v", err)
	}
	s.SetNamespaceLimit(50, time.Nanosecond)
	s.Attribute("team-a", d)
	time.Sleep(time.Millisecond)
	if err := s.Admit("team-a"); err != nil {
		t.Errorf("Admit after the use aged out of the window = %v", err)
	}
}
