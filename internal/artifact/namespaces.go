package artifact

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// FlagMaxNamespaceBytes names the manager flag of SetNamespaceLimit; refusals name it.
const FlagMaxNamespaceBytes = "max-artifact-bytes-per-namespace"

// ErrNamespaceFull is the class of Admit's refusal.
var ErrNamespaceFull = errors.New("the namespace's artifacts take its share of the store")

// nsUse is one namespace's use of one artifact.
type nsUse struct {
	size int64
	at   time.Time
}

// SetNamespaceLimit makes Admit refuse a namespace new artifacts while the artifacts its
// Stacks used within window take limit bytes or more (0: no limit). Use is what this
// process has seen (Attribute) since it started: a bound on what one tenant can make the
// store download and keep, not an exact account.
func (s *Store) SetNamespaceLimit(limit int64, window time.Duration) {
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	s.nsLimit, s.nsWindow = limit, window
}

// Attribute records that namespace ns uses the stored artifact digest (every namespace
// using an artifact pays for it in full).
func (s *Store) Attribute(ns, digest string) {
	h, err := digestHex(digest)
	if err != nil || ns == "" {
		return
	}
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	if s.nsLimit <= 0 {
		return
	}
	uses := s.byNS[ns]
	if uses == nil {
		if s.byNS == nil {
			s.byNS = map[string]map[string]nsUse{}
		}
		uses = map[string]nsUse{}
		s.byNS[ns] = uses
	}
	u, ok := uses[digest]
	if !ok {
		fi, err := os.Stat(s.path(h))
		if err != nil {
			return
		}
		u.size = fi.Size()
	}
	u.at = time.Now()
	uses[digest] = u
}

// namespaceUsage is the bytes of the artifacts namespace ns used within the window.
func (s *Store) namespaceUsage(ns string) int64 {
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	return s.usageLocked(ns)
}

func (s *Store) usageLocked(ns string) int64 {
	cutoff := time.Now().Add(-s.nsWindow)
	var n int64
	for d, u := range s.byNS[ns] {
		if s.nsWindow > 0 && u.at.Before(cutoff) {
			delete(s.byNS[ns], d)
			continue
		}
		n += u.size
	}
	return n
}

// Admit refuses namespace ns a new artifact while its usage is at or over the limit, with
// an error of class ErrNamespaceFull that says so; what ns already uses is still served.
func (s *Store) Admit(ns string) error {
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	if s.nsLimit <= 0 {
		return nil
	}
	if used := s.usageLocked(ns); used >= s.nsLimit {
		return fmt.Errorf("%w: the artifacts namespace %q used within %s take %s, at or over its cap of %s (--%s); an artifact it stops using stops counting after that",
			ErrNamespaceFull, ns, s.nsWindow, FormatBytes(used), FormatBytes(s.nsLimit), FlagMaxNamespaceBytes)
	}
	return nil
}

// forget drops digest from every namespace's account: Collect removed it.
func (s *Store) forget(digest string) {
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	for _, uses := range s.byNS {
		delete(uses, digest)
	}
}
