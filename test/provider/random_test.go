package provider

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

func TestRandom_RandomString_AlphabetAndLength(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 16, 1024} {
		s, err := randomString(rand.Reader, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != n {
			t.Errorf("len = %d, want %d", len(s), n)
		}
		if i := strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune(randomAlphabet, r) }); i >= 0 {
			t.Errorf("character %q at %d is not alphanumeric", s[i], i)
		}
	}
}

func TestRandom_RandomString_RejectsBiasedBytes(t *testing.T) {
	t.Parallel()
	// 255 and 248 are >= 248 (4*62) and must be skipped; 0 -> 'A', 61 -> '9', 62 -> 'A'.
	src := bytes.NewReader(append([]byte{255, 0, 248, 61, 62}, make([]byte, 64)...))
	s, err := randomString(src, 3)
	if err != nil {
		t.Fatal(err)
	}
	if s != "A9A" {
		t.Errorf("randomString = %q, want %q", s, "A9A")
	}
}

func TestRandom_RandomString_PropagatesReadError(t *testing.T) {
	t.Parallel()
	if _, err := randomString(bytes.NewReader(nil), 4); err == nil {
		t.Fatal("randomString succeeded with an empty reader")
	}
}

func TestRandom_Create_ResultHasRequestedLength(t *testing.T) {
	t.Parallel()
	length := 40
	resp, err := (&Random{}).Create(t.Context(), infer.CreateRequest[RandomArgs]{Inputs: RandomArgs{Length: &length}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Output.Result) != length || resp.Output.Length != length {
		t.Errorf("got result %q (length output %d), want %d characters", resp.Output.Result, resp.Output.Length, length)
	}
	if resp.ID == "" || strings.Contains(resp.Output.Result, resp.ID) {
		t.Errorf("ID %q is empty or leaks the result", resp.ID)
	}
}

func TestRandom_Check_LengthRules(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		inputs     map[string]property.Value
		wantFailed []string
		wantLength int
	}{
		"omitted defaults to 16": {map[string]property.Value{}, nil, 16},
		"minimum ok":             {map[string]property.Value{"length": property.New(1.0)}, nil, 1},
		"maximum ok":             {map[string]property.Value{"length": property.New(1024.0)}, nil, 1024},
		"zero":                   {map[string]property.Value{"length": property.New(0.0)}, []string{"length"}, 0},
		"too long":               {map[string]property.Value{"length": property.New(1025.0)}, []string{"length"}, 1025},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			resp, err := (&Random{}).Check(t.Context(), checkRequest(tc.inputs))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantFailed, failedProperties(resp.Failures)); diff != "" {
				t.Errorf("failures mismatch (-want +got):\n%s", diff)
			}
			if resp.Inputs.Length == nil || *resp.Inputs.Length != tc.wantLength {
				t.Errorf("checked length = %v, want %d", resp.Inputs.Length, tc.wantLength)
			}
		})
	}
}

func checkRequest(inputs map[string]property.Value) infer.CheckRequest {
	return infer.CheckRequest{Name: "r", NewInputs: property.NewMap(inputs)}
}
