package engine

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// tailMarker starts a Tail's text once older bytes were dropped, so a reader knows the log
// does not begin there.
const tailMarker = "…\n"

// minTail keeps room for the marker and at least a few bytes of log.
const minTail = len(tailMarker) + 4

// Tail is an io.Writer that keeps only the last bytes written: enough of an engine log to
// explain a failure in an Update's status without growing with the run. It is safe for
// concurrent use (the CLI's stdout and stderr are copied by different goroutines).
type Tail struct {
	mu      sync.Mutex
	n       int
	buf     []byte
	dropped bool
}

// NewTail returns a Tail whose String is at most n bytes, truncation marker included.
// n below 8 is raised to 8.
func NewTail(n int) *Tail {
	n = max(n, minTail)
	return &Tail{n: n, buf: make([]byte, 0, n)}
}

// Write keeps the last n bytes of everything written so far. It never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	written := len(p)
	if len(p) > t.n {
		p = p[len(p)-t.n:]
		t.dropped = true
	}
	if over := len(t.buf) + len(p) - t.n; over > 0 {
		// copy handles the overlap; the backing array never grows past n.
		t.buf = t.buf[:copy(t.buf, t.buf[over:])]
		t.dropped = true
	}
	t.buf = append(t.buf, p...)
	return written, nil
}

// String returns the kept text as valid UTF-8: a leading partial rune left by truncation
// is dropped, as is a trailing one whose remaining bytes have not been written yet, and
// any other invalid byte run becomes "?" (a one-byte replacement keeps the n-byte bound).
// When older bytes were dropped, the text starts with "…\n" and the whole stays within n.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	data := t.buf
	prefix := ""
	if t.dropped {
		prefix = tailMarker
		if room := t.n - len(tailMarker); len(data) > room {
			data = data[len(data)-room:]
		}
		for i := 0; i < utf8.UTFMax-1 && len(data) > 0 && !utf8.RuneStart(data[0]); i++ {
			data = data[1:]
		}
	}
	data = trimIncompleteRune(data)
	return prefix + strings.ToValidUTF8(string(data), "?")
}

// Truncated reports whether older bytes were dropped.
func (t *Tail) Truncated() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dropped
}

// trimIncompleteRune drops the start of a multi-byte rune at the end of b whose other
// bytes are still to come, so a Tail read mid-write shows no replacement character.
func trimIncompleteRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}
