package project

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// FuzzRender feeds Render Programs whose spec is any JSON the API server could store (the
// CRD schema is looser than the YAML host: values are arbitrary JSON).
//
// Properties: Render never panics and is deterministic; what it renders is one YAML
// document whose top-level keys are exactly name, runtime and the spec's non-empty
// sections, so no value, however it is quoted or what it contains, adds or hides a key;
// and reading the document back yields the spec, value for value: the project the YAML
// host runs says what the Program says.
func FuzzRender(f *testing.F) {
	f.Add("seed", []byte(`{"resources":{"f":{"type":"stackwright-testing:index:File","properties":{"path":"a.txt","content":"${greeting}"}}},"configuration":{"greeting":{"type":"String","default":"hi"}},"outputs":{"digest":"${f.sha256}"}}`))
	f.Add("injection", []byte(`{"variables":{"v":"x\nresources:\n  evil:\n    type: a:b:C","w":"--- \n...","y":"yes","n":null,"o":{"fn::invoke":{"function":"f","arguments":{"a":[1,2.5e300,-0,"on"]}}}}}`))
	f.Add("packages", []byte(`{"packages":{"aws":"aws@6.0.0"},"outputs":{"":"empty key","#":"#","k: v":"&anchor *alias !tag"}}`))
	f.Fuzz(func(t *testing.T, name string, specJSON []byte) {
		var spec pulumiv1.ProgramSpec
		if json.Unmarshal(specJSON, &spec) != nil {
			return
		}
		p := &pulumiv1.Program{Program: spec}
		p.Name = name
		out, err := Render(p)
		if err != nil {
			return
		}
		again, err := Render(p)
		if err != nil || !bytes.Equal(out, again) {
			t.Fatalf("Render is not deterministic: %q, then %q (%v)", out, again, err)
		}
		asJSON, err := yaml.YAMLToJSON(out)
		if err != nil {
			t.Fatalf("rendered project is not YAML: %v\n%s", err, out)
		}
		got := decode(t, asJSON)
		if got["name"] != name || got["runtime"] != "yaml" {
			t.Errorf("name, runtime = %v, %v; want %q, yaml", got["name"], got["runtime"], name)
		}
		delete(got, "name")
		delete(got, "runtime")
		if _, ok := got["configuration"]; !ok {
			got["configuration"] = nil
		}
		// The spec as the API server stores it (JSON), sections renamed as rendered.
		b, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		want := decode(t, b)
		if _, ok := want["configuration"]; !ok {
			want["configuration"] = nil
		}
		if diff := cmp.Diff(want, got, sameNumber); diff != "" {
			t.Errorf("the rendered project reads back differently from the spec (-spec +rendered):\n%s\nrendered:\n%s", diff, out)
		}
	})
}

// decode reads a JSON object, numbers as written: values beyond float64 stay comparable.
func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("failed to decode %s: %v", b, err)
	}
	return m
}

// sameNumber compares numbers as Pulumi holds them, 64-bit floats: YAML spells 2.5e300 as
// 2.5e+300, -0 as 0, and an integer past 2^53 as the float it is.
var sameNumber = cmp.Comparer(func(a, b json.Number) bool {
	x, errA := strconv.ParseFloat(string(a), 64)
	y, errB := strconv.ParseFloat(string(b), 64)
	return errA == nil && errB == nil && x == y
})
