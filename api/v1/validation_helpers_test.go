package v1_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// invalidCase is a manifest the API server must refuse, and a substring of the error that
// names the offending field.
type invalidCase struct {
	name string
	// body is the YAML of the object below metadata: "spec: ..." or "program: ...".
	body string
	want string
}

// runInvalid creates each case as an object of the given kind and requires an Invalid error
// whose message contains the case's substring.
func runInvalid(t *testing.T, apiVersion, kind string, cases []invalidCase) {
	t.Helper()
	ctx := testContext(t)
	ns := env.Namespace(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body map[string]any
			if err := yaml.Unmarshal([]byte(tc.body), &body); err != nil {
				t.Fatalf("bad test case: %v", err)
			}
			obj := newObject(apiVersion, kind, ns, strings.ToLower(tc.name))
			for k, v := range body {
				if k != "metadata" {
					obj.Object[k] = v
				}
			}
			err := env.Client.Create(ctx, obj)
			if err == nil {
				t.Fatalf("%s was accepted; want it refused with %q", kind, tc.want)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v; want an Invalid error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %q; want it to contain %q", err, tc.want)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// jsonByValue compares apiextensionsv1.JSON by the JSON value it holds, so that
// insignificant differences (key order, spacing) do not count but any change of value,
// including 3 becoming 3.0, does.
var jsonByValue = cmp.Transformer("JSONValue", func(j apiextensionsv1.JSON) any {
	d := json.NewDecoder(bytes.NewReader(j.Raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "invalid JSON: " + string(j.Raw)
	}
	return v
})

func rawJSON(t *testing.T, s string) *apiextensionsv1.JSON {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		t.Fatalf("bad JSON %s: %v", s, err)
	}
	return &apiextensionsv1.JSON{Raw: buf.Bytes()}
}

// decodeJSON decodes s the way the API machinery does: integers as int64, other numbers as
// float64.
func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"X","v":` + s + `}`)); err != nil {
		t.Fatalf("bad JSON %s: %v", s, err)
	}
	return u.Object["v"]
}

func newObject(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func ptr[T any](v T) *T { return &v }

// decodeInto decodes JSON into a T, refusing fields T does not have.
func decodeInto[T any](t *testing.T, s string) *T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("bad test case: %v", err)
	}
	return &v
}
