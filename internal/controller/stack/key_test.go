package stack

import (
	"strings"
	"testing"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/source"
)

func TestDesiredStateKey_Inputs_EachChangesKey(t *testing.T) {
	t.Parallel()
	base := func() (*pulumiv1.Stack, source.Artifact, string) {
		s := &pulumiv1.Stack{Spec: pulumiv1.StackSpec{Stack: "dev"}}
		s.Generation = 1
		return s, source.Artifact{Revision: "r1", Digest: "sha256:aa"}, "fp"
	}
	s, a, fp := base()
	ref := desiredStateKey(s, operation(&s.Spec), a, fp)
	if again := desiredStateKey(s, operation(&s.Spec), a, fp); again != ref {
		t.Fatalf("key not deterministic: %s then %s", ref, again)
	}
	mutations := map[string]func(*pulumiv1.Stack, *source.Artifact, *string){
		"revision":   func(_ *pulumiv1.Stack, a *source.Artifact, _ *string) { a.Revision = "r2" },
		"digest":     func(_ *pulumiv1.Stack, a *source.Artifact, _ *string) { a.Digest = "sha256:bb" },
		"dir":        func(_ *pulumiv1.Stack, a *source.Artifact, _ *string) { a.Dir = "sub" },
		"generation": func(s *pulumiv1.Stack, _ *source.Artifact, _ *string) { s.Generation = 2 },
		"inputs":     func(_ *pulumiv1.Stack, _ *source.Artifact, fp *string) { *fp = "fp2" },
		"preview":    func(s *pulumiv1.Stack, _ *source.Artifact, _ *string) { s.Spec.Preview = true },
		"refresh":    func(s *pulumiv1.Stack, _ *source.Artifact, _ *string) { s.Spec.Refresh = true },
		"targets":    func(s *pulumiv1.Stack, _ *source.Artifact, _ *string) { s.Spec.Targets = []string{"urn:x"} },
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			s, a, fp := base()
			mutate(s, &a, &fp)
			if desiredStateKey(s, operation(&s.Spec), a, fp) == ref {
				t.Errorf("changing %s did not change the desired-state key", name)
			}
		})
	}
}

func TestUpdateName_Stack_FitsAndStaysDeterministic(t *testing.T) {
	t.Parallel()
	key := "0123456789abcdef"
	tests := []struct {
		name, stack string
		attempt     int32
		want        string
	}{
		{name: "short", stack: "web", attempt: 1, want: "web-0123456789-1"},
		{name: "attemptCounts", stack: "web", attempt: 12, want: "web-0123456789-12"},
		{name: "longTruncatedWithoutTrailingDot", stack: strings.Repeat("a", 239) + "." + strings.Repeat("b", 20), attempt: 3, want: strings.Repeat("a", 239) + "-0123456789-3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := updateName(tt.stack, key, tt.attempt)
			if got != tt.want {
				t.Errorf("updateName() = %q; want %q", got, tt.want)
			}
			if len(got) > 253 {
				t.Errorf("updateName() is %d characters; names are limited to 253", len(got))
			}
		})
	}
}
