package clip

import (
	"strings"
	"unicode/utf8"
)

const ellipsis = "…"

// Text returns s cut to at most n bytes at a rune boundary, the cut marked with "…" (which
// counts towards n).
func Text(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n-len(ellipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// Line returns s on one line, every run of white space (newlines too) one space, cut as
// Text cuts.
func Line(s string, n int) string {
	return Text(strings.Join(strings.Fields(s), " "), n)
}
