package conversion

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// versions is a kind whose v2 renames size to replicas and moves network.cidr to
// network.range, and whose v3 renames replicas to count.
var versions = []v1alpha1.TemplateVersion{
	{Name: "v1"},
	{Name: "v2", Renames: []v1alpha1.ParameterRename{{From: "size", To: "replicas"}, {From: "network.cidr", To: "network.range"}}},
	{Name: "v3", Renames: []v1alpha1.ParameterRename{{From: "replicas", To: "count"}}},
}

func instance(t *testing.T, apiVersion, params string) map[string]any {
	t.Helper()
	obj := map[string]any{}
	doc := `{"apiVersion":"` + apiVersion + `","kind":"Queue","metadata":{"name":"q","namespace":"team-a"},"spec":{"parameters":` + params + `,"writeConnectionSecretToRef":{"name":"conn"}}}`
	if err := json.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func TestConvert_Versions(t *testing.T) {
	tests := []struct {
		name         string
		from, to     string
		params, want string
		wantErr      string
	}{
		{name: "up one version", from: "v1", to: "v2", params: `{"size":3,"tier":"gold"}`, want: `{"replicas":3,"tier":"gold"}`},
		{name: "up two versions", from: "v1", to: "v3", params: `{"size":3}`, want: `{"count":3}`},
		{name: "down two versions", from: "v3", to: "v1", params: `{"count":3,"network":{"range":"10.0.0.0/8"}}`, want: `{"size":3,"network":{"cidr":"10.0.0.0/8"}}`},
		{name: "nested up", from: "v1", to: "v2", params: `{"network":{"cidr":"10.0.0.0/8","zone":"a"}}`, want: `{"network":{"range":"10.0.0.0/8","zone":"a"}}`},
		{name: "nested parent made on the way down", from: "v2", to: "v1", params: `{"network":{"range":"10.1.0.0/16"}}`, want: `{"network":{"cidr":"10.1.0.0/16"}}`},
		{name: "nothing set moves nothing", from: "v1", to: "v3", params: `{}`, want: `{}`},
		{name: "same version", from: "v2", to: "v2", params: `{"replicas":1}`, want: `{"replicas":1}`},
		{name: "a renamed value of another type moves as it is", from: "v1", to: "v2", params: `{"size":{"a":1}}`, want: `{"replicas":{"a":1}}`},
		{name: "unknown source version", from: "v9", to: "v1", params: `{}`, wantErr: "version v9 is not a version of the kind"},
		{name: "unknown target version", from: "v1", to: "v9", params: `{}`, wantErr: "version v9 is not a version of the kind"},
		{name: "a parent that is not an object", from: "v2", to: "v1", params: `{"network":"flat","replicas":2}`, want: `{"network":"flat","size":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := instance(t, "example.org/"+tt.from, tt.params)
			err := Convert(obj, "example.org", versions, tt.to)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Convert() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := instance(t, "example.org/"+tt.to, tt.want)
			if diff := cmp.Diff(want, obj); diff != "" {
				t.Errorf("Convert() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConvert_ParentNotAnObject(t *testing.T) {
	obj := instance(t, "example.org/v1", `{"network":{"cidr":"10.0.0.0/8"}}`)
	vs := []v1alpha1.TemplateVersion{{Name: "v1"}, {Name: "v2", Renames: []v1alpha1.ParameterRename{{From: "network.cidr", To: "size.cidr"}}}}
	obj["spec"].(map[string]any)["parameters"].(map[string]any)["size"] = "3"
	err := Convert(obj, "example.org", vs, "v2")
	if err == nil || !strings.Contains(err.Error(), "size is not an object") {
		t.Fatalf("Convert() error = %v, want one naming size", err)
	}
}

func TestConvert_OtherGroup(t *testing.T) {
	obj := instance(t, "other.org/v1", `{}`)
	if err := Convert(obj, "example.org", versions, "v2"); err == nil {
		t.Fatal("Convert() converted an object of another group")
	}
}

func schema(t *testing.T, doc string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	var s apiextensionsv1.JSONSchemaProps
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCheck_Renames(t *testing.T) {
	const v1 = `{"type":"object","properties":{"size":{"type":"integer"},"network":{"type":"object","properties":{"cidr":{"type":"string"}}}}}`
	const v2 = `{"type":"object","properties":{"replicas":{"type":"integer"},"network":{"type":"object","properties":{"range":{"type":"string"}}}}}`
	tests := []struct {
		name    string
		v2      string
		renames []v1alpha1.ParameterRename
		first   bool
		want    []string
	}{
		{name: "valid", v2: v2, renames: []v1alpha1.ParameterRename{{From: "size", To: "replicas"}, {From: "network.cidr", To: "network.range"}}},
		{name: "the first version", v2: v2, first: true, renames: []v1alpha1.ParameterRename{{From: "size", To: "replicas"}},
			want: []string{"version v1 renames parameters, but no version comes before it in spec.versions"}},
		{name: "from unknown", v2: v2, renames: []v1alpha1.ParameterRename{{From: "count", To: "replicas"}},
			want: []string{"version v2 renames count to replicas: version v1 has no parameter count"}},
		{name: "to unknown", v2: v2, renames: []v1alpha1.ParameterRename{{From: "size", To: "count"}},
			want: []string{"version v2 renames size to count: version v2 has no parameter count"}},
		{name: "type changes", v2: `{"type":"object","properties":{"replicas":{"type":"string"}}}`, renames: []v1alpha1.ParameterRename{{From: "size", To: "replicas"}},
			want: []string{`version v2 renames size to replicas: its type changes from "integer" to "string", which no conversion can keep`}},
		{name: "from still there", v2: `{"type":"object","properties":{"replicas":{"type":"integer"},"size":{"type":"integer"}}}`, renames: []v1alpha1.ParameterRename{{From: "size", To: "replicas"}},
			want: []string{"version v2 renames size to replicas: version v2 still has a parameter size"}},
		{name: "to already there", v2: `{"type":"object","properties":{"network":{"type":"object","properties":{"cidr":{"type":"string"}}}}}`, renames: []v1alpha1.ParameterRename{{From: "size", To: "network"}},
			want: []string{`version v2 renames size to network: its type changes from "integer" to "object", which no conversion can keep`, "version v2 renames size to network: version v1 already has a parameter network"}},
		{name: "two renames to one name", v2: v2, renames: []v1alpha1.ParameterRename{{From: "size", To: "replicas"}, {From: "network", To: "replicas"}},
			want: []string{`version v2 renames network to replicas: replicas is the new name of another rename of this version`, `version v2 renames network to replicas: its type changes from "object" to "integer", which no conversion can keep`, "version v2 renames network to replicas: version v2 still has a parameter network"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := []v1alpha1.TemplateVersion{{Name: "v1"}, {Name: "v2", Renames: tt.renames}}
			if tt.first {
				vs = []v1alpha1.TemplateVersion{{Name: "v1", Renames: tt.renames}, {Name: "v2"}}
			}
			err := Check(vs, []apiextensionsv1.JSONSchemaProps{schema(t, v1), schema(t, tt.v2)})
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Check() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenamed_Schema(t *testing.T) {
	v1 := schema(t, `{"type":"object","required":["size"],"properties":{"size":{"type":"integer"},"network":{"type":"object","properties":{"cidr":{"type":"string"}}}}}`)
	got := Renamed(&v1, versions, 0, 2)
	want := schema(t, `{"type":"object","required":["count"],"properties":{"count":{"type":"integer"},"network":{"type":"object","properties":{"range":{"type":"string"}}}}}`)
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("Renamed() (-want +got):\n%s", diff)
	}
	if _, ok := v1.Properties["size"]; !ok {
		t.Error("Renamed() changed the schema it was given")
	}
	if Renamed(nil, versions, 0, 2) != nil {
		t.Error("Renamed(nil) is not nil")
	}
}

func TestParameters_ToARevisionsVersion(t *testing.T) {
	tests := []struct {
		name     string
		from, to string
		params   map[string]any
		want     map[string]any
		wantErr  string
	}{
		{name: "back to the version a held revision names", from: "v3", to: "v1", params: map[string]any{"count": int64(2)}, want: map[string]any{"size": int64(2)}},
		{name: "same version", from: "v2", to: "v2", params: map[string]any{"replicas": int64(2)}, want: map[string]any{"replicas": int64(2)}},
		{name: "no parameters", from: "v3", to: "v1"},
		{name: "a version no longer declared", from: "v3", to: "v0", params: map[string]any{}, wantErr: "version v0 is not a version of the kind any more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before map[string]any
			if tt.params != nil {
				before = runtimeCopy(tt.params)
			}
			got, err := Parameters(tt.params, versions, tt.from, tt.to)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Parameters() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parameters() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.params); diff != "" {
				t.Errorf("Parameters() changed its input (-want +got):\n%s", diff)
			}
		})
	}
}

func runtimeCopy(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
