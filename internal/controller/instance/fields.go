package instance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// fieldGap says why a status field is unset.
type fieldGap struct {
	field, why string
	// warn marks what the platform team has to fix (a secret output, a value of another
	// type), as opposed to an output not published yet, which a later update may bring.
	warn bool
}

func (g fieldGap) String() string { return g.field + " (" + g.why + ")" }

// published is what the Stack published of its outputs, as the instance controller reads
// them: the values of its status (secret ones masked), and the names of those exported to
// the platform namespace's Secret (all) and ConfigMap (the non-secret ones).
type published struct {
	values map[string]apiextensionsv1.JSON
	all    map[string][]byte
	public map[string]string
}

// statusFields fills the declared status fields from what the Stack published. A field is
// filled only from an output the template lists and the Stack exported as non-secret (so
// the tenant's ConfigMap receives it too), converted to the field's type; every other one
// is unset, and a gap says why. No message quotes a value.
func statusFields(decl []v1alpha1.TemplateStatusField, listed []string, p published) (map[string]apiextensionsv1.JSON, []fieldGap) {
	fields := map[string]apiextensionsv1.JSON{}
	var gaps []fieldGap
	for _, f := range decl {
		v, gap := fieldValue(f, listed, p)
		if gap != nil {
			gaps = append(gaps, *gap)
			continue
		}
		fields[f.Name] = v
	}
	if len(fields) == 0 {
		fields = nil
	}
	return fields, gaps
}

func fieldValue(f v1alpha1.TemplateStatusField, listed []string, p published) (apiextensionsv1.JSON, *fieldGap) {
	gap := func(warn bool, format string, args ...any) (apiextensionsv1.JSON, *fieldGap) {
		return apiextensionsv1.JSON{}, &fieldGap{field: f.Name, why: fmt.Sprintf(format, args...), warn: warn}
	}
	output, path, _ := strings.Cut(f.Output, ".")
	_, exported := p.all[output]
	_, public := p.public[output]
	raw, ok := p.values[output]
	switch {
	case !slices.Contains(listed, output):
		// The template controller refuses such a template; this holds in the moment
		// before it has.
		return gap(true, "output %s is not one the template publishes", output)
	case exported && !public:
		return gap(true, "output %s is secret", output)
	case !public || !ok:
		return gap(false, "output %s is not published yet", output)
	}
	dec := json.NewDecoder(bytes.NewReader(raw.Raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return gap(true, "output %s is not JSON", output)
	}
	if path != "" {
		var found bool
		if v, found = followPath(v, path); !found {
			return gap(false, "output %s has no %s", output, path)
		}
	}
	if v == nil {
		return gap(false, "%s is null", f.Output)
	}
	out, err := convert(v, f.Type)
	if err != nil {
		return gap(true, "%s %v", f.Output, err)
	}
	return out, nil
}

// followPath follows a dotted path into a decoded JSON value: an object's key, or an array's index.
func followPath(v any, path string) (any, bool) {
	for step := range strings.SplitSeq(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[step]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// convert turns a decoded JSON value (numbers as json.Number) into a field of type typ:
// a string takes a string, number or boolean (as its JSON text); an integer a whole number,
// or a string that is one; a number any number, or a string that is one; a boolean a
// boolean, or the string "true" or "false". The error says what v is instead.
func convert(v any, typ v1alpha1.StatusFieldType) (apiextensionsv1.JSON, error) {
	var out any
	switch x := v.(type) {
	case string:
		switch typ {
		case v1alpha1.StatusFieldString:
			out = x
		case v1alpha1.StatusFieldInteger:
			n, ok := integer(json.Number(x))
			if !ok {
				return apiextensionsv1.JSON{}, fmt.Errorf("is a string that is not an integer")
			}
			out = n
		case v1alpha1.StatusFieldNumber:
			n, ok := number(json.Number(x))
			if !ok {
				return apiextensionsv1.JSON{}, fmt.Errorf("is a string that is not a number")
			}
			out = n
		case v1alpha1.StatusFieldBoolean:
			if x != "true" && x != "false" {
				return apiextensionsv1.JSON{}, fmt.Errorf("is a string that is not true or false")
			}
			out = x == "true"
		}
	case json.Number:
		var ok bool
		switch typ {
		case v1alpha1.StatusFieldString:
			out, ok = x.String(), true
		case v1alpha1.StatusFieldInteger:
			if out, ok = integer(x); !ok {
				return apiextensionsv1.JSON{}, fmt.Errorf("is a number that is not a 64-bit integer")
			}
		case v1alpha1.StatusFieldNumber:
			if out, ok = number(x); !ok {
				return apiextensionsv1.JSON{}, fmt.Errorf("is a number out of range")
			}
		}
		if !ok {
			return apiextensionsv1.JSON{}, fmt.Errorf("is a number, not %s", article(typ))
		}
	case bool:
		switch typ {
		case v1alpha1.StatusFieldString:
			out = strconv.FormatBool(x)
		case v1alpha1.StatusFieldBoolean:
			out = x
		default:
			return apiextensionsv1.JSON{}, fmt.Errorf("is a boolean, not %s", article(typ))
		}
	case map[string]any:
		return apiextensionsv1.JSON{}, fmt.Errorf("is an object, not %s", article(typ))
	case []any:
		return apiextensionsv1.JSON{}, fmt.Errorf("is an array, not %s", article(typ))
	}
	if out == nil {
		return apiextensionsv1.JSON{}, fmt.Errorf("cannot be %s", article(typ))
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return apiextensionsv1.JSON{}, fmt.Errorf("cannot be %s", article(typ))
	}
	return apiextensionsv1.JSON{Raw: raw}, nil
}

// integer reads n as an int64: written as one, or as a whole number within range (3.0).
func integer(n json.Number) (int64, bool) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, true
	}
	f, ok := number(n)
	if !ok || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// number reads n as a finite float64; only JSON's number syntax, so no "NaN", "Inf" or
// hexadecimal.
func number(n json.Number) (float64, bool) {
	var f float64
	if !json.Valid([]byte(n)) || json.Unmarshal([]byte(n), &f) != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

func article(typ v1alpha1.StatusFieldType) string {
	if typ == v1alpha1.StatusFieldInteger {
		return "an integer"
	}
	return "a " + string(typ)
}

// retainFields keeps, of fields as the status held them, those the template still
// declares, converted to their type: without the Stack's exported outputs to read, the
// fields stay what they were, as status.outputs does, but never one the kind's schema
// would refuse.
func retainFields(fields map[string]apiextensionsv1.JSON, decl []v1alpha1.TemplateStatusField) map[string]apiextensionsv1.JSON {
	out := map[string]apiextensionsv1.JSON{}
	for _, f := range decl {
		raw, ok := fields[f.Name]
		if !ok {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw.Raw))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			continue
		}
		if j, err := convert(v, f.Type); err == nil {
			out[f.Name] = j
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// unsetForReady lists the fields readyWhen names that are not set (a string counts only
// when non-empty), each with why, from gaps.
func unsetForReady(readyWhen []string, fields map[string]apiextensionsv1.JSON, gaps []fieldGap) []fieldGap {
	var unset []fieldGap
	for _, name := range readyWhen {
		if v, ok := fields[name]; ok {
			if string(v.Raw) != `""` {
				continue
			}
			unset = append(unset, fieldGap{field: name, why: "empty"})
			continue
		}
		g := fieldGap{field: name, why: "not published yet"}
		if i := slices.IndexFunc(gaps, func(g fieldGap) bool { return g.field == name }); i >= 0 {
			g = gaps[i]
		}
		unset = append(unset, g)
	}
	return unset
}
