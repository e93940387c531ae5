package engine

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestTail_String_Writes(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		writes []string
		want   string
	}{
		{"empty", 16, nil, ""},
		{"fits", 16, []string{"hello ", "world"}, "hello world"},
		{"exactly n", 8, []string{"12345678"}, "12345678"},
		// 8 bytes: the 4-byte marker "…\n" and the last 4 bytes written.
		{"truncated across writes", 8, []string{"12345", "6789"}, "…\n6789"},
		{"one write larger than n", 8, []string{"abcdefghijkl"}, "…\nijkl"},
		// 10 bytes: marker + 6; the last 6 bytes "\xa9é€" begin mid-rune.
		{"cut at a rune boundary", 10, []string{"aaaaé", "é€"}, "…\né€"},
		{"n raised to the minimum", 1, []string{"abcdefghij"}, "…\nghij"},
		{"incomplete last rune held back", 16, []string{"cost 5\xe2\x82"}, "cost 5"},
		{"incomplete rune completed", 16, []string{"cost 5\xe2\x82", "\xac"}, "cost 5€"},
		{"invalid bytes replaced", 16, []string{"a\xffb"}, "a?b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tail := NewTail(tt.n)
			for _, w := range tt.writes {
				if n, err := tail.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
			}
			got := tail.String()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("String (-want +got):\n%s", diff)
			}
			if len(got) > max(tt.n, minTail) || !utf8.ValidString(got) {
				t.Errorf("String = %q (%d bytes); want valid UTF-8 within %d bytes", got, len(got), tt.n)
			}
		})
	}
}

func TestTail_Write_Concurrent(t *testing.T) {
	const n = 1 << 10
	tail := NewTail(n)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				fmt.Fprintf(tail, "writer %d line %d ✓\n", g, i)
				if i%50 == 0 {
					if s := tail.String(); len(s) > n || !utf8.ValidString(s) {
						t.Errorf("String during writes = %d bytes, valid UTF-8 %v; want ≤ %d and valid", len(s), utf8.ValidString(s), n)
					}
				}
			}
		})
	}
	wg.Wait()
	s := tail.String()
	if !strings.HasPrefix(s, tailMarker) || len(s) > n || !tail.Truncated() {
		t.Errorf("String = %d bytes starting %q; want ≤ %d bytes starting with the marker", len(s), s[:min(len(s), 10)], n)
	}
	// Writes are atomic: every complete line in the tail is one writer's line.
	lines := strings.Split(strings.TrimPrefix(s, tailMarker), "\n")
	for _, l := range lines[1 : len(lines)-1] {
		if !strings.HasPrefix(l, "writer ") || !strings.HasSuffix(l, " ✓") {
			t.Errorf("interleaved line %q", l)
		}
	}
}

func TestLogSink_Write_SecretSplitAcrossWritesMasked(t *testing.T) {
	var out bytes.Buffer
	sink := newLogSink(&out, newScrubber("hunter2-secret", "multi\nline-secret"))
	stdout, stderr := sink.stream(), sink.stream()
	for _, w := range []string{"token hun", "ter2-sec", "ret accepted\nstill hunter", "2-secret"} {
		if _, err := stdout.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stderr.Write([]byte("error: line-secret leaked\n")); err != nil {
		t.Fatal(err)
	}
	stdout.Flush()
	stderr.Flush()
	sink.println("--- done hunter2-secret")
	want := "token [secret] accepted\nerror: [secret] leaked\nstill [secret]--- done [secret]\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

func TestLogSink_Write_LongLineFlushedWithoutSplittingSecret(t *testing.T) {
	var out bytes.Buffer
	secret := "hunter2-secret"
	sink := newLogSink(&out, newScrubber(secret))
	w := sink.stream()
	long := strings.Repeat("x", longLine) + "hunter2" // the secret's start is at the end
	if _, err := w.Write([]byte(long)); err != nil {
		t.Fatal(err)
	}
	if out.Len() == 0 {
		t.Fatal("nothing flushed from a line longer than the buffer")
	}
	if strings.Contains(out.String(), "hunter2") {
		t.Fatal("the start of a secret was flushed before its end arrived")
	}
	if _, err := w.Write([]byte("-secret\n")); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); strings.Contains(got, "hunter2") || !strings.HasSuffix(got, "x[secret]\n") {
		t.Errorf("log ends %q; want the secret masked", got[max(0, len(got)-40):])
	}
}
