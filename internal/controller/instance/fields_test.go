package instance

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// decoded is raw JSON as the controller decodes an output: numbers as json.Number.
func decoded(t *testing.T, raw string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}

func TestConvert_OutputValue_ToTheFieldsType(t *testing.T) {
	const (
		str   = v1alpha1.StatusFieldString
		integ = v1alpha1.StatusFieldInteger
		num   = v1alpha1.StatusFieldNumber
		boo   = v1alpha1.StatusFieldBoolean
	)
	tests := []struct {
		value   string
		typ     v1alpha1.StatusFieldType
		want    string
		wantErr string
	}{
		{value: `"https://db.example.com"`, typ: str, want: `"https://db.example.com"`},
		{value: `""`, typ: str, want: `""`},
		{value: `5432`, typ: str, want: `"5432"`},
		{value: `1.5`, typ: str, want: `"1.5"`},
		{value: `true`, typ: str, want: `"true"`},
		{value: `{"host":"h"}`, typ: str, wantErr: "is an object, not a string"},
		{value: `["a"]`, typ: str, wantErr: "is an array, not a string"},

		{value: `5432`, typ: integ, want: `5432`},
		{value: `3.0`, typ: integ, want: `3`},
		{value: `-7`, typ: integ, want: `-7`},
		{value: `9223372036854775807`, typ: integ, want: `9223372036854775807`},
		{value: `"5432"`, typ: integ, want: `5432`},
		{value: `1.5`, typ: integ, wantErr: "is a number that is not a 64-bit integer"},
		{value: `1e19`, typ: integ, wantErr: "is a number that is not a 64-bit integer"},
		{value: `"5432/tcp"`, typ: integ, wantErr: "is a string that is not an integer"},
		{value: `"0x10"`, typ: integ, wantErr: "is a string that is not an integer"},
		{value: `true`, typ: integ, wantErr: "is a boolean, not an integer"},

		{value: `0.25`, typ: num, want: `0.25`},
		{value: `12`, typ: num, want: `12`},
		{value: `"0.25"`, typ: num, want: `0.25`},
		{value: `"NaN"`, typ: num, wantErr: "is a string that is not a number"},
		{value: `"Inf"`, typ: num, wantErr: "is a string that is not a number"},
		{value: `1e400`, typ: num, wantErr: "is a number out of range"},
		{value: `[1]`, typ: num, wantErr: "is an array, not a number"},

		{value: `true`, typ: boo, want: `true`},
		{value: `"false"`, typ: boo, want: `false`},
		{value: `"yes"`, typ: boo, wantErr: "is a string that is not true or false"},
		{value: `1`, typ: boo, wantErr: "is a number, not a boolean"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s_%s", tt.typ, tt.value), func(t *testing.T) {
			got, err := convert(decoded(t, tt.value), tt.typ)
			if diff := cmp.Diff(tt.wantErr, errText(err)); diff != "" {
				t.Fatalf("convert() error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, string(got.Raw)); diff != "" {
				t.Errorf("convert() (-want +got):\n%s", diff)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A field is filled only from an output the template lists that the Stack exported as
// non-secret; a secret output's value (here a canary) reaches no field and no message.
func TestStatusFields_FromPublishedOutputs_NeverSecretOnes(t *testing.T) {
	const canary = "canary-4a7f"
	p := published{
		values: map[string]apiextensionsv1.JSON{
			"url":      {Raw: []byte(`"https://db.example.com"`)},
			"db":       {Raw: []byte(`{"port":5432,"nodes":[{"primary":true},{"primary":false}],"load":null}`)},
			"password": {Raw: []byte(`"[secret]"`)},
			"internal": {Raw: []byte(`"platform only"`)},
		},
		all: map[string][]byte{
			"url": []byte("https://db.example.com"), "db": []byte(`{"port":5432}`), "password": []byte(canary), "internal": []byte("platform only"),
		},
		public: map[string]string{"url": "https://db.example.com", "db": `{"port":5432}`, "internal": "platform only"},
	}
	// The Stack's status may hold a value as it was before the output became secret: the
	// exported objects, not the value, say what is secret.
	p.values["password"] = apiextensionsv1.JSON{Raw: []byte(`"` + canary + `"`)}
	listed := []string{"url", "db", "password", "missing"}
	decl := []v1alpha1.TemplateStatusField{
		{Name: "endpoint", Type: v1alpha1.StatusFieldString, Output: "url"},
		{Name: "port", Type: v1alpha1.StatusFieldInteger, Output: "db.port"},
		{Name: "primary", Type: v1alpha1.StatusFieldBoolean, Output: "db.nodes.1.primary"},
		{Name: "password", Type: v1alpha1.StatusFieldString, Output: "password"},
		{Name: "internal", Type: v1alpha1.StatusFieldString, Output: "internal"},
		{Name: "replica", Type: v1alpha1.StatusFieldString, Output: "db.nodes.2"},
		{Name: "load", Type: v1alpha1.StatusFieldNumber, Output: "db.load"},
		{Name: "later", Type: v1alpha1.StatusFieldString, Output: "missing"},
		{Name: "host", Type: v1alpha1.StatusFieldString, Output: "db"},
	}
	fields, gaps := statusFields(decl, listed, p)
	wantFields := map[string]apiextensionsv1.JSON{
		"endpoint": {Raw: []byte(`"https://db.example.com"`)},
		"port":     {Raw: []byte(`5432`)},
		"primary":  {Raw: []byte(`false`)},
	}
	if diff := cmp.Diff(wantFields, fields); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	wantGaps := []fieldGap{
		{field: "password", why: "output password is secret", warn: true},
		{field: "internal", why: "output internal is not one the template publishes", warn: true},
		{field: "replica", why: "output db has no nodes.2"},
		{field: "load", why: "db.load is null"},
		{field: "later", why: "output missing is not published yet"},
		{field: "host", why: "db is an object, not a string", warn: true},
	}
	if diff := cmp.Diff(wantGaps, gaps, cmp.AllowUnexported(fieldGap{})); diff != "" {
		t.Errorf("gaps (-want +got):\n%s", diff)
	}
	text := fmt.Sprint(fields, gaps)
	if strings.Contains(text, canary) || strings.Contains(text, "platform only") {
		t.Errorf("a secret or unlisted output's value reached the status: %s", text)
	}
}

func TestUnsetForReady_ReadyWhen_NamesWhatIsMissingAndWhy(t *testing.T) {
	fields := map[string]apiextensionsv1.JSON{"endpoint": {Raw: []byte(`"https://db"`)}, "name": {Raw: []byte(`""`)}, "port": {Raw: []byte(`0`)}}
	gaps := []fieldGap{{field: "password", why: "output password is secret", warn: true}}
	tests := []struct {
		name      string
		readyWhen []string
		want      []fieldGap
	}{
		{name: "none"},
		{name: "allSet", readyWhen: []string{"endpoint", "port"}},
		{name: "emptyString", readyWhen: []string{"endpoint", "name"}, want: []fieldGap{{field: "name", why: "empty"}}},
		{name: "withAGap", readyWhen: []string{"password"}, want: gaps},
		{name: "notPublished", readyWhen: []string{"replica"}, want: []fieldGap{{field: "replica", why: "not published yet"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unsetForReady(tt.readyWhen, fields, gaps)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(fieldGap{})); diff != "" {
				t.Errorf("unsetForReady() (-want +got):\n%s", diff)
			}
		})
	}
}

// Without exported outputs to read, an instance keeps its fields, but only those still
// declared, as their type now is: a status the kind's schema refuses would never be written.
func TestRetainFields_WithoutOutputs_KeepsWhatTheSchemaTakes(t *testing.T) {
	held := map[string]apiextensionsv1.JSON{
		"endpoint": {Raw: []byte(`"https://db"`)},
		"port":     {Raw: []byte(`"5432"`)},
		"ready":    {Raw: []byte(`"soon"`)},
		"gone":     {Raw: []byte(`1`)},
	}
	decl := []v1alpha1.TemplateStatusField{
		{Name: "endpoint", Type: v1alpha1.StatusFieldString, Output: "url"},
		{Name: "port", Type: v1alpha1.StatusFieldInteger, Output: "port"},
		{Name: "ready", Type: v1alpha1.StatusFieldBoolean, Output: "ready"},
	}
	want := map[string]apiextensionsv1.JSON{"endpoint": {Raw: []byte(`"https://db"`)}, "port": {Raw: []byte(`5432`)}}
	if diff := cmp.Diff(want, retainFields(held, decl)); diff != "" {
		t.Errorf("retainFields() (-want +got):\n%s", diff)
	}
	if got := retainFields(held, nil); got != nil {
		t.Errorf("retainFields() without declared fields = %v; want nil", got)
	}
}
