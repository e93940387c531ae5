package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip_Text_CutsAtRuneBoundaryWithinBound(t *testing.T) {
	tests := []struct {
		name string
		s    string
		n    int
		want string
	}{
		{name: "fits", s: "hello", n: 5, want: "hello"},
		{name: "asciiCut", s: "hello world", n: 8, want: "hello…"},
		{name: "multibyteNotSplit", s: "ééééé", n: 8, want: "éé…"},
		{name: "boundSmallerThanEllipsis", s: "hello", n: 2, want: "…"},
		{name: "empty", s: "", n: 0, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.s, tt.n); got != tt.want {
				t.Errorf("Text(%q, %d) = %q; want %q", tt.s, tt.n, got, tt.want)
			}
		})
	}
}

func TestClip_Line_JoinsLinesThenCuts(t *testing.T) {
	if got, want := Line("error:\n  the\tthing\n failed  ", 100), "error: the thing failed"; got != want {
		t.Errorf("Line = %q; want %q", got, want)
	}
	if got := Line(strings.Repeat("ab ", 50), 20); len(got) > 20 || !strings.HasSuffix(got, "…") {
		t.Errorf("Line = %q (%d bytes); want at most 20 bytes ending in …", got, len(got))
	}
}

func FuzzText(f *testing.F) {
	f.Add("héllo wörld", 7)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 || !utf8.ValidString(s) {
			return
		}
		got := Text(s, n)
		if len(got) > max(n, len("…")) || !utf8.ValidString(got) {
			t.Errorf("Text(%q, %d) = %q: %d bytes, valid %v", s, n, got, len(got), utf8.ValidString(got))
		}
		if len(s) <= n && got != s {
			t.Errorf("Text(%q, %d) = %q; want it unchanged", s, n, got)
		}
	})
}
