package provider

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

func TestPath_Clean_Rules(t *testing.T) {
	t.Parallel()
	type result struct {
		Clean string
		Err   string // substring of the error; "" means no error
	}
	cases := map[string]struct {
		path string
		want result
	}{
		"empty":                       {"", result{Err: "must not be empty"}},
		"absolute":                    {"/etc/passwd", result{Err: "is absolute"}},
		"dotdot":                      {"..", result{Err: "escapes"}},
		"dotdot prefix":               {"../x", result{Err: "escapes"}},
		"dotdot after nesting":        {"a/../../x", result{Err: "escapes"}},
		"root itself":                 {".", result{Err: "root directory itself"}},
		"root via dotdot":             {"a/..", result{Err: "root directory itself"}},
		"plain ok":                    {"x.txt", result{Clean: "x.txt"}},
		"nested ok":                   {"a/b/c.txt", result{Clean: "a/b/c.txt"}},
		"dotdot staying inside ok":    {"a/../b.txt", result{Clean: "b.txt"}},
		"redundant separators ok":     {"./a//b/", result{Clean: "a/b"}},
		"dotdot-like file name ok":    {"..x", result{Clean: "..x"}},
		"dotdot-like dir name nested": {"a/..b/c", result{Clean: "a/..b/c"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clean, err := cleanRelPath(tc.path)
			got := result{Clean: clean}
			if err != nil {
				got.Err = tc.want.Err // compared below by substring
				if tc.want.Err == "" || !strings.Contains(err.Error(), tc.want.Err) {
					t.Fatalf("cleanRelPath(%q) error = %v, want error containing %q", tc.path, err, tc.want.Err)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cleanRelPath(%q) mismatch (-want +got):\n%s", tc.path, diff)
			}
		})
	}
}

func TestPath_Resolve_JoinsUnderRoot(t *testing.T) {
	t.Parallel()
	got, err := resolvePath("/r", "a/../b/c.txt")
	if err != nil {
		t.Fatal(err)
	}
	if want := "/r/b/c.txt"; got != want {
		t.Errorf("resolvePath = %q, want %q", got, want)
	}
}

func TestPath_RootDir_ErrorsWhenUnset(t *testing.T) {
	t.Setenv(RootEnvVar, "")
	_, err := rootDir()
	if err == nil || !strings.Contains(err.Error(), RootEnvVar) {
		t.Fatalf("rootDir() error = %v, want one naming %s", err, RootEnvVar)
	}
}

func TestFile_Check_PathFailures(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		path property.Value
		want []string // properties with failures
	}{
		"absolute":                 {property.New("/abs"), []string{"path"}},
		"dotdot":                   {property.New("../up"), []string{"path"}},
		"nested ok":                {property.New("a/b.txt"), nil},
		"secret nested ok":         {property.New("a/b.txt").WithSecret(true), nil},
		"secret dotdot":            {property.New("../up").WithSecret(true), []string{"path"}},
		"unknown skips validation": {property.New(property.Computed), nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			resp, err := (&File{}).Check(t.Context(), checkRequest(map[string]property.Value{
				"path": tc.path, "content": property.New("x"),
			}))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, failedProperties(resp.Failures)); diff != "" {
				t.Errorf("failures mismatch (-want +got):\n%s\nall failures: %v", diff, resp.Failures)
			}
		})
	}
}

func failedProperties(failures []p.CheckFailure) []string {
	var props []string
	for _, f := range failures {
		props = append(props, f.Property)
	}
	return props
}
