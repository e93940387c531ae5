package project

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"sigs.k8s.io/yaml"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
)

// File is the one file a rendered Program consists of.
const File = "Pulumi.yaml"

// configurationKey is where Program configuration goes. Pulumi YAML also reads the newer
// `config` block (and warns that `configuration` is deprecated), but there the pulumi CLI
// validates values set on the stack against the project schema first, more strictly than
// the YAML host does for `configuration`: a List<String> set as the JSON string
// '["a","b"]' (how a string-valued stack config carries a list), a Boolean set as "True", an Int set as "3.0" or an
// object for a String are refused, and Number has no spelling at all. PKO renders
// `configuration`, and Stacks written for PKO must keep working, so we do the same and
// accept the warning in the update log. The program package's
// TestRender_Render_RunsOnRealEngine guards this.
const configurationKey = "configuration"

// Render returns the Pulumi.yaml of p: name (p's name, as PKO does), runtime yaml, then
// packages, configuration, variables, resources and outputs as given, each only when it
// has entries. Keys within a section are sorted, so equal specs give equal bytes whatever
// their namespace or history.
//
// Render refuses specs that pass admission but that the pulumi CLI or YAML host would
// reject on every run (a name that is not a valid project name, a resource with both get
// and properties, a config entry with neither type nor default, a name used twice or the
// reserved name "pulumi"), so the Program reports the mistake once instead of every Stack
// using it failing its updates.
func Render(p *pulumiv1.Program) ([]byte, error) {
	if err := validate(p); err != nil {
		return nil, fmt.Errorf("failed to render Program: %w", err)
	}
	spec := &p.Program

	// Each section is marshalled on its own and concatenated: one-key mappings at column
	// zero join into one valid mapping, and the order stays the conventional one instead
	// of the alphabetical order a single marshal would impose.
	sections := []struct {
		key   string
		value any
		keep  bool
	}{
		{"name", p.Name, true},
		{"runtime", "yaml", true},
		{"packages", spec.Packages, len(spec.Packages) > 0},
		{configurationKey, spec.Configuration, len(spec.Configuration) > 0},
		{"variables", spec.Variables, len(spec.Variables) > 0},
		{"resources", spec.Resources, len(spec.Resources) > 0},
		{"outputs", spec.Outputs, len(spec.Outputs) > 0},
	}
	var buf bytes.Buffer
	for _, s := range sections {
		if !s.keep {
			continue
		}
		b, err := yaml.Marshal(map[string]any{s.key: s.value})
		if err != nil {
			return nil, fmt.Errorf("failed to render Program %s: %w", s.key, err)
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// Pack returns the files of p's project, ready for artifact.Pack.
func Pack(p *pulumiv1.Program) (map[string][]byte, error) {
	b, err := Render(p)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{File: b}, nil
}

// MaxArtifactBytes caps a rendered Program's tarball. etcd already keeps a Program under
// about 1.5 MiB, so only a bug could get near it.
const MaxArtifactBytes = 16 << 20

// Tarball renders p into the artifact Stacks run: Pack's files in a deterministic tarball.
// Both steps are pure functions of the spec, so any failure is the spec's.
func Tarball(p *pulumiv1.Program) ([]byte, error) {
	files, err := Pack(p)
	if err != nil {
		return nil, err
	}
	tarball, err := artifact.Pack(files)
	if err != nil {
		return nil, fmt.Errorf("failed to pack Program: %w", err)
	}
	if len(tarball) > MaxArtifactBytes {
		return nil, fmt.Errorf("failed to pack Program: artifact of %d bytes exceeds %d", len(tarball), MaxArtifactBytes)
	}
	return tarball, nil
}

// Revision is the source revision a Stack records for a Program: the Program's generation,
// which changes exactly when its spec does.
func Revision(p *pulumiv1.Program) string {
	return fmt.Sprintf("generation/%d", p.Generation)
}

func validate(p *pulumiv1.Program) error {
	var errs []error
	if err := tokens.ValidateProjectName(p.Name); err != nil {
		errs = append(errs, fmt.Errorf("name %q is not a valid Pulumi project name: %w", p.Name, err))
	}
	spec := &p.Program
	// The YAML host keeps config, variables and resources in one namespace.
	seen := map[string]string{}
	declare := func(kind, name string) {
		if name == "pulumi" {
			errs = append(errs, fmt.Errorf("%s %q uses the reserved name pulumi", kind, name))
		}
		if other, ok := seen[name]; ok {
			errs = append(errs, fmt.Errorf("%s %q has the same name as %s %q", kind, name, other, name))
		}
		seen[name] = kind
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Configuration)) {
		declare("configuration", name)
		if c := spec.Configuration[name]; c.Type == "" && c.Default == nil {
			errs = append(errs, fmt.Errorf("configuration %q needs a type, a default, or both", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Variables)) {
		declare("variable", name)
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Resources)) {
		declare("resource", name)
		if r := spec.Resources[name]; r.Get != nil && len(r.Properties) > 0 {
			errs = append(errs, fmt.Errorf("resource %q sets both get and properties, which are mutually exclusive", name))
		}
	}
	errs = append(errs, checkNumbers(spec)...)
	if len(errs) == 0 {
		return nil
	}
	// One line: the message ends up in a condition that kubectl prints.
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}

// checkNumbers refuses numbers beyond a 64-bit float, the only number Pulumi has: YAML
// would read one back as a string, and the program would not get what the spec says.
func checkNumbers(spec *pulumiv1.ProgramSpec) []error {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil // a value that is not JSON: rendering its section says which
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil
	}
	var errs []error
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case json.Number:
			if _, err := strconv.ParseFloat(string(v), 64); err != nil {
				errs = append(errs, fmt.Errorf("%s: number %s is out of range (Pulumi numbers are 64-bit floats)", path, v))
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(path+"."+k, v[k])
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("spec", v)
	return errs
}
