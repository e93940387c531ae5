package compat_test

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const (
	admitted = "admitted"
	rejected = "rejected"
)

// outcome is what creating a manifest does, or must do. In an expectation, Error and
// Warnings hold substrings; in an observation, each substring that was found, followed by
// the full text of whatever matched none, so that go-cmp shows a failing case as the
// difference between the two.
type outcome struct {
	Result string
	// Error holds substrings that the rejection message must all contain.
	Error []string
	// Warnings holds one substring per warning the API server must return. Any other
	// warning is a failure too: PKO's examples must apply without noise.
	Warnings []string
}

// header is the machine-readable part of a manifest's leading comment block.
type header struct {
	expect outcome
	// pko is what PKO's own CRD schema does with the manifest: admitted or rejected.
	pko string
	// sources are the files of PKO's repository the case was read from, so that a
	// reviewer can check it against PKO.
	sources []string
}

// parseHeader reads the "# expect:", "# pko:" and "# PKO source:" lines of the comment
// block at the top of a manifest; lines after the first non-comment line are YAML and are
// not looked at.
func parseHeader(text string) (header, error) {
	var h header
	var seenExpect, seenPKO bool
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		comment, ok := strings.CutPrefix(line, "#")
		if !ok {
			break
		}
		comment = strings.TrimSpace(comment)
		switch {
		case strings.HasPrefix(comment, "expect:"):
			if seenExpect {
				return header{}, errors.New("failed to parse header: more than one expect line")
			}
			seenExpect = true
			o, err := parseExpect(strings.TrimPrefix(comment, "expect:"))
			if err != nil {
				return header{}, fmt.Errorf("failed to parse expect line %q: %w", comment, err)
			}
			h.expect = o
		case strings.HasPrefix(comment, "PKO source:"):
			if src := strings.TrimSpace(strings.TrimPrefix(comment, "PKO source:")); src != "" {
				h.sources = append(h.sources, src)
			}
		case strings.HasPrefix(comment, "pko:"):
			if seenPKO {
				return header{}, errors.New("failed to parse header: more than one pko line")
			}
			seenPKO = true
			h.pko = strings.TrimSpace(strings.TrimPrefix(comment, "pko:"))
			if h.pko != admitted && h.pko != rejected {
				return header{}, fmt.Errorf("failed to parse pko line %q: want %q or %q", comment, admitted, rejected)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return header{}, fmt.Errorf("failed to read header: %w", err)
	}
	if !seenExpect || !seenPKO {
		return header{}, errors.New(`failed to parse header: it needs one "# expect:" and one "# pko:" line`)
	}
	if len(h.sources) == 0 {
		return header{}, errors.New(`failed to parse header: it needs a "# PKO source: <path in PKO's repository>" line`)
	}
	return h, nil
}

// parseExpect reads `admitted [warning="…"]…` or `rejected "…" ["…"]… [warning="…"]…`,
// the quoted parts in Go syntax.
func parseExpect(s string) (outcome, error) {
	result, rest, _ := strings.Cut(strings.TrimSpace(s), " ")
	if result != admitted && result != rejected {
		return outcome{}, fmt.Errorf("outcome %q is neither %q nor %q", result, admitted, rejected)
	}
	o := outcome{Result: result}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		list := &o.Error
		if after, ok := strings.CutPrefix(rest, "warning="); ok {
			list, rest = &o.Warnings, after
		} else if result == admitted {
			return outcome{}, fmt.Errorf("unexpected %q: an admitted manifest has only warning=\"…\" parts", rest)
		}
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return outcome{}, fmt.Errorf("failed to read quoted string at %q: %w", rest, err)
		}
		v, err := strconv.Unquote(q)
		if err != nil {
			return outcome{}, fmt.Errorf("failed to unquote %s: %w", q, err)
		}
		if v == "" {
			return outcome{}, errors.New("an empty substring matches anything")
		}
		*list = append(*list, v)
		rest = rest[len(q):]
	}
	// Without a substring, a manifest refused for another reason than the one it pins
	// (a CRD that is missing, say) would pass.
	if result == rejected && len(o.Error) == 0 {
		return outcome{}, errors.New(`a rejection must name a substring of its message: rejected "…"`)
	}
	return o, nil
}

// observe describes what a create did in the terms of want, so that cmp.Diff(want, got)
// is empty exactly when the create did what was expected.
func observe(want outcome, err error, warnings []string) outcome {
	got := outcome{Result: admitted}
	if err != nil {
		got.Result = rejected
		msg := err.Error()
		unmatched := len(want.Error) == 0
		for _, s := range want.Error {
			if strings.Contains(msg, s) {
				got.Error = append(got.Error, s)
			} else {
				unmatched = true
			}
		}
		if unmatched {
			got.Error = append(got.Error, msg)
		}
	}
	// Each expected substring claims the first warning that contains it and is not
	// claimed yet; warnings left over are shown whole.
	claimed := make([]bool, len(warnings))
	for _, s := range want.Warnings {
		for i, w := range warnings {
			if !claimed[i] && strings.Contains(w, s) {
				claimed[i] = true
				got.Warnings = append(got.Warnings, s)
				break
			}
		}
	}
	for i, w := range warnings {
		if !claimed[i] {
			got.Warnings = append(got.Warnings, w)
		}
	}
	return got
}

func TestHeader_Parse_ReadsExpectAndPKOLines(t *testing.T) {
	const src = "# PKO source: examples/x.yaml\n"
	srcs := []string{"examples/x.yaml"}
	for _, tc := range []struct {
		name    string
		text    string
		want    header
		wantErr string
	}{
		{
			name: "admittedPlain",
			text: "# Pins X.\n# PKO source: examples/a.yaml\n# PKO source: docs/b.md\n# expect: admitted\n# pko: admitted\napiVersion: v1\n",
			want: header{expect: outcome{Result: admitted}, pko: admitted, sources: []string{"examples/a.yaml", "docs/b.md"}},
		},
		{
			name: "admittedWithWarnings",
			text: src + "# expect: admitted warning=\"branch\" warning=\"a \\\"quoted\\\" word\"\n# pko: admitted\n",
			want: header{expect: outcome{Result: admitted, Warnings: []string{"branch", `a "quoted" word`}}, pko: admitted, sources: srcs},
		},
		{
			name: "rejectedWithSubstrings",
			text: "#expect: rejected \"spec.stack\" \"Required value\"\n#pko: rejected\n" + src,
			want: header{expect: outcome{Result: rejected, Error: []string{"spec.stack", "Required value"}}, pko: rejected, sources: srcs},
		},
		{
			name: "linesAfterTheCommentBlockAreYAML",
			text: src + "# expect: admitted\n# pko: admitted\nspec:\n# expect: rejected \"x\"\n",
			want: header{expect: outcome{Result: admitted}, pko: admitted, sources: srcs},
		},
		{name: "rejectedWithoutSubstring", text: "# expect: rejected\n# pko: rejected\n", wantErr: "must name a substring"},
		{name: "admittedWithBareSubstring", text: "# expect: admitted \"x\"\n# pko: admitted\n", wantErr: "only warning="},
		{name: "unknownOutcome", text: "# expect: accepted\n# pko: admitted\n", wantErr: "neither"},
		{name: "unterminatedQuote", text: "# expect: admitted warning=\"x\n# pko: admitted\n", wantErr: "quoted string"},
		{name: "emptySubstring", text: "# expect: admitted warning=\"\"\n# pko: admitted\n", wantErr: "empty substring"},
		{name: "missingPKO", text: src + "# expect: admitted\n", wantErr: "needs one"},
		{name: "missingSource", text: "# expect: admitted\n# pko: admitted\n", wantErr: "PKO source"},
		{name: "badPKO", text: "# expect: admitted\n# pko: maybe\n", wantErr: "pko line"},
		{name: "twoExpects", text: "# expect: admitted\n# expect: admitted\n# pko: admitted\n", wantErr: "more than one expect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseHeader(tc.text)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v; want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(header{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
		})
	}
}

// The observation equals the expectation exactly when the create did what was expected;
// otherwise the difference names what was missing and shows what came instead.
func TestOutcome_Observe_DiffsOnlyOnMismatch(t *testing.T) {
	refused := errors.New(`Stack.pulumi.com "x" is invalid: spec.stack: Required value`)
	for _, tc := range []struct {
		name     string
		want     outcome
		err      error
		warnings []string
		match    bool
	}{
		{name: "admittedClean", want: outcome{Result: admitted}, match: true},
		{name: "admittedWithWarning", want: outcome{Result: admitted, Warnings: []string{"branch"}}, warnings: []string{"spec.branch and spec.commit are both set"}, match: true},
		{name: "warningsInAnyOrder", want: outcome{Result: admitted, Warnings: []string{"b", "a"}}, warnings: []string{"a!", "b!"}, match: true},
		{name: "unexpectedWarning", want: outcome{Result: admitted}, warnings: []string{"noise"}},
		{name: "missingWarning", want: outcome{Result: admitted, Warnings: []string{"branch"}}},
		{name: "oneWarningCannotServeTwo", want: outcome{Result: admitted, Warnings: []string{"spec", "spec"}}, warnings: []string{"spec.x"}},
		{name: "rejectedAsExpected", want: outcome{Result: rejected, Error: []string{"spec.stack", "Required"}}, err: refused, match: true},
		{name: "rejectedForAnotherReason", want: outcome{Result: rejected, Error: []string{"spec.branch"}}, err: refused},
		{name: "rejectedInsteadOfAdmitted", want: outcome{Result: admitted}, err: refused},
		{name: "admittedInsteadOfRejected", want: outcome{Result: rejected, Error: []string{"spec.stack"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diff := cmp.Diff(tc.want, observe(tc.want, tc.err, tc.warnings), cmpopts.EquateEmpty())
			if tc.match && diff != "" {
				t.Errorf("outcome differs although it matches (-want +got):\n%s", diff)
			}
			if !tc.match && diff == "" {
				t.Errorf("outcome %+v observed as matching %+v", observe(tc.want, tc.err, tc.warnings), tc.want)
			}
		})
	}
}
