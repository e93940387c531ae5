package engine

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"sync"
)

// redacted replaces a secret's plaintext; it is what the CLI itself prints for secrets.
const redacted = "[secret]"

// minSecretLen is the shortest plaintext the scrubber masks. The CLI already masks every
// secret it knows about; the scrubber is a second line of defence for text the CLI does
// not control (provider and program messages), and masking every "1" or "on" in a log
// would make it unreadable while protecting nothing worth a secret.
const minSecretLen = 4

// longLine bounds how much of a line without a newline the log writer holds back.
const longLine = 64 << 10

// secretEnvWords mark environment variables whose values are credentials. Env carries
// backend tokens and values from envRefs; the names are the only hint of which are secret.
var secretEnvWords = []string{"TOKEN", "SECRET", "PASSWORD", "PASSPHRASE", "PRIVATE_KEY", "CREDENTIAL"}

// scrubber masks known secret plaintexts in text leaving the engine.
type scrubber struct {
	secrets []string // longest first, so a secret containing another is masked whole
	maxLen  int
}

func newScrubber(values ...string) *scrubber {
	s := &scrubber{}
	seen := map[string]bool{}
	for _, v := range values {
		// A multi-line secret (a PEM key) is masked line by line too: logs are scrubbed a
		// line at a time.
		for _, part := range append([]string{v}, strings.Split(v, "\n")...) {
			part = strings.TrimRight(part, "\r")
			if len(part) < minSecretLen || seen[part] {
				continue
			}
			seen[part] = true
			s.secrets = append(s.secrets, part)
			s.maxLen = max(s.maxLen, len(part))
		}
	}
	slices.SortFunc(s.secrets, func(a, b string) int { return len(b) - len(a) })
	return s
}

func (s *scrubber) String(text string) string {
	if s == nil {
		return text
	}
	for _, v := range s.secrets {
		text = strings.ReplaceAll(text, v, redacted)
	}
	return text
}

func (s *scrubber) bytes(b []byte) []byte {
	if s == nil {
		return b
	}
	for _, v := range s.secrets {
		b = bytes.ReplaceAll(b, []byte(v), []byte(redacted))
	}
	return b
}

// safeCut returns how much of an unterminated buffer can be written now without emitting
// the beginning of a secret whose end has not arrived yet.
func (s *scrubber) safeCut(b []byte) int {
	cut := len(b)
	if s == nil || s.maxLen == 0 {
		return cut
	}
	cut = max(0, len(b)-(s.maxLen-1))
	for _, v := range s.secrets {
		for i := max(0, cut-len(v)+1); i < cut; i++ {
			n := min(len(v), len(b)-i)
			if i+len(v) > cut && bytes.Equal(b[i:i+n], []byte(v[:n])) {
				cut = i
				break
			}
		}
	}
	return cut
}

// logSink serialises the CLI's stdout and stderr into the caller's log, scrubbed a line at
// a time so that a secret split across two writes is still recognised.
type logSink struct {
	mu    sync.Mutex
	w     io.Writer
	scrub *scrubber
}

func newLogSink(w io.Writer, s *scrubber) *logSink {
	if w == nil {
		w = io.Discard
	}
	return &logSink{w: w, scrub: s}
}

// println writes one line of our own (step headers); it is scrubbed like the CLI's.
func (l *logSink) println(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, l.scrub.String(line)+"\n")
}

// stream returns a writer for one output stream of one CLI invocation; Flush it when the
// invocation ends.
func (l *logSink) stream() *lineWriter { return &lineWriter{sink: l} }

type lineWriter struct {
	sink *logSink
	buf  []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.sink.mu.Lock()
	defer w.sink.mu.Unlock()
	w.buf = append(w.buf, p...)
	if i := bytes.LastIndexByte(w.buf, '\n'); i >= 0 {
		w.emit(i + 1)
	}
	if len(w.buf) > longLine {
		w.emit(w.sink.scrub.safeCut(w.buf))
	}
	// Log failures must not fail the operation: the run matters more than its log.
	return len(p), nil
}

// Flush writes what is left of an unterminated last line.
func (w *lineWriter) Flush() {
	w.sink.mu.Lock()
	defer w.sink.mu.Unlock()
	w.emit(len(w.buf))
}

func (w *lineWriter) emit(n int) {
	if n == 0 {
		return
	}
	_, _ = w.sink.w.Write(w.sink.scrub.bytes(w.buf[:n]))
	w.buf = w.buf[:copy(w.buf, w.buf[n:])]
}
