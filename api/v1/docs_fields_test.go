package v1_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// docsWholeSubtrees are the fields whose row in docs/api.md documents everything beneath
// them, by kind. Anything else must have a row of its own (or be a scalar list item or map
// value, which its container's row describes).
var docsWholeSubtrees = map[string][]string{
	"Stack": {
		"spec.workspaceTemplate", // PKO's Workspace apply configuration with a full Pod spec; the row says which parts apply
		"spec.updateTemplate",    // PKO's Update apply configuration; partly applied (docs/api.md)
		"status.conditions",      // metav1.Condition; the Conditions section lists types and reasons
		"status.stackwright",     // internal bookkeeping that may change between releases
	},
	"Program": {
		"status.conditions", // metav1.Condition
	},
	"Update": {
		"status.conditions", // metav1.Condition
	},
	"Update (auto.pulumi.com)": {
		"status.conditions", // metav1.Condition
	},
	"Policy": {
		"spec.stackSelector", // metav1.LabelSelector
		"status.conditions",  // metav1.Condition
	},
	"ClusterPolicy": {
		"spec.stackSelector", // metav1.LabelSelector
		"status.conditions",  // metav1.Condition
	},
	"StackTemplate": {
		"spec.namespaceSelector", // metav1.LabelSelector
		"status.conditions",      // metav1.Condition
	},
	"StackSet": {
		"spec.generator.gitBranches.gitAuth",    // a Stack's gitAuth, documented with the Stack
		"spec.generator.gitDirectories.gitAuth", // a Stack's gitAuth, documented with the Stack
		"status.conditions",                     // metav1.Condition
	},
}

// docsPKOValues are the values the PKO column may start with, as the doc's legend defines them
// (plus the qualified forms the tables use).
var docsPKOValues = []string{
	"Honoured",
	"Mapped",
	"Accepted, not applied",
	"Partly applied",
	"Stackwright",
	"Honoured with the Job executor",
}

// docsProgramResourcePrefix is what a leading "…" stands for in the Program table.
const docsProgramResourcePrefix = "program.resources.<k>"

// Every field of every served CRD version has a row in docs/api.md (or sits under a subtree
// documented as a whole), every row names a field that exists, and every PKO column says
// one of the legend's values. All gaps are reported at once, so one run is a to-do list.
func TestDocs_APIFields_EveryCRDFieldIsListed(t *testing.T) {
	root := repoRoot(t)
	docs := docsParseAPI(t, filepath.Join(root, "docs", "api.md"))
	crds := docsReadCRDs(t, filepath.Join(root, "config", "crd", "bases"))

	var missing, unknown, stale []string
	missingVersions := map[string][]string{}
	unknownVersions := map[string][]string{}
	note := func(into map[string][]string, key, version string) {
		if !slices.Contains(into[key], version) {
			into[key] = append(into[key], version)
		}
	}

	for _, crd := range crds {
		kind := docsKind(crd.Spec.Names.Kind, crd.Spec.Group)
		listed, rel := docs.abs[kind], docs.rel[kind]
		if len(listed) == 0 {
			t.Errorf("docs/api.md has no field rows under a \"## %s\" section, but %s serves kind %s", kind, crd.Spec.Group, kind)
			continue
		}
		docsCheckVersionsAlike(t, crd)
		whole := map[string]bool{}
		for _, p := range docsWholeSubtrees[kind] {
			whole[p] = true
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				t.Errorf("%s %s/%s has no openAPIV3Schema", kind, crd.Spec.Group, v.Name)
				continue
			}
			gv := crd.Spec.Group + "/" + v.Name
			nodes := docsSchemaNodes(t, v.Schema.OpenAPIV3Schema)

			for p := range whole {
				if nodes[p] == nil {
					stale = append(stale, fmt.Sprintf("%s %s: allowlisted subtree %s is not in the schema", kind, gv, p))
				} else if _, ok := listed[p]; !ok {
					stale = append(stale, fmt.Sprintf("%s %s: allowlisted subtree %s has no row in docs/api.md", kind, gv, p))
				}
			}

			covered := docsCoverage(listed, rel, whole)
			for _, n := range nodes {
				if len(n.children) == 0 && !covered(n) {
					note(missingVersions, kind+" "+n.path, gv)
				}
			}

			for p, line := range listed {
				if nodes[p] == nil {
					note(unknownVersions, fmt.Sprintf("%s %s (docs/api.md:%d)", kind, p, line), gv)
				}
			}
			var refs []*docsNode
			for _, n := range nodes {
				if n.resourceRef {
					refs = append(refs, n)
				}
			}
			for p, line := range rel {
				if len(refs) == 0 {
					note(unknownVersions, fmt.Sprintf("%s ResourceRef %s (docs/api.md:%d): the schema has no ResourceRef", kind, p, line), gv)
				}
				for _, r := range refs {
					if nodes[r.path+"."+p] == nil {
						note(unknownVersions, fmt.Sprintf("%s ResourceRef %s (docs/api.md:%d): absent from %s", kind, p, line, r.path), gv)
					}
				}
			}
		}
	}
	for kind := range docs.abs {
		if !slices.ContainsFunc(crds, func(c *apiextensionsv1.CustomResourceDefinition) bool {
			return docsKind(c.Spec.Names.Kind, c.Spec.Group) == kind
		}) {
			unknown = append(unknown, fmt.Sprintf("docs/api.md has a \"## %s\" section with field rows, but no CRD serves kind %s", kind, kind))
		}
	}
	for k, vs := range missingVersions {
		missing = append(missing, fmt.Sprintf("%s (%s)", k, strings.Join(vs, ", ")))
	}
	for k, vs := range unknownVersions {
		unknown = append(unknown, fmt.Sprintf("%s (%s)", k, strings.Join(vs, ", ")))
	}

	docsReport(t, "fields of the CRDs that docs/api.md does not list (add a row; <k> is any <…> placeholder, [i] any list index)", missing)
	docsReport(t, "rows in docs/api.md for fields the CRDs do not have", unknown)
	docsReport(t, "stale entries in docsWholeSubtrees", stale)
	docsReport(t, "rows in docs/api.md that the test cannot read", docs.problems)
	docsReport(t, fmt.Sprintf("rows in docs/api.md whose PKO column does not start with one of %q", docsPKOValues), docs.badPKO)
}

// docsKind names a kind as docs/api.md's sections do: PKO's own kinds of a group Stackwright
// does not define (auto.pulumi.com's Update) carry their group, so as not to be taken for
// Stackwright's kind of the same name.
func docsKind(kind, group string) string {
	if group == "" || group == "pulumi.com" || group == "stackwright.dev" {
		return kind
	}
	return kind + " (" + group + ")"
}

func docsReport(t *testing.T, what string, items []string) {
	t.Helper()
	if len(items) == 0 {
		return
	}
	sort.Strings(items)
	t.Errorf("%d %s:\n  %s", len(items), what, strings.Join(items, "\n  "))
}

// docsNode is one field of a schema: a property, a list item ([i]) or a map value (<k>).
type docsNode struct {
	path     string
	parent   *docsNode
	children []*docsNode
	// element marks a list item or map value.
	element bool
	// resourceRef marks a PKO ResourceRef, whose fields the doc lists once, relative to it.
	resourceRef bool
}

// docsSchemaNodes indexes every field beneath the root by path, apiVersion, kind and
// metadata of the root aside (the API server's, not ours).
func docsSchemaNodes(t *testing.T, root *apiextensionsv1.JSONSchemaProps) map[string]*docsNode {
	t.Helper()
	nodes := map[string]*docsNode{}
	var walk func(n *docsNode, s *apiextensionsv1.JSONSchemaProps)
	add := func(parent *docsNode, path string, element bool, s *apiextensionsv1.JSONSchemaProps) {
		n := &docsNode{path: path, parent: parent, element: element, resourceRef: docsIsResourceRef(s)}
		if parent != nil {
			parent.children = append(parent.children, n)
		}
		nodes[path] = n
		walk(n, s)
	}
	walk = func(n *docsNode, s *apiextensionsv1.JSONSchemaProps) {
		for name, prop := range s.Properties {
			if n == nil {
				if name == "apiVersion" || name == "kind" || name == "metadata" {
					continue
				}
				add(nil, name, false, &prop)
				continue
			}
			add(n, n.path+"."+name, false, &prop)
		}
		if n == nil {
			return
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			add(n, n.path+".<k>", true, s.AdditionalProperties.Schema)
		}
		if s.Items != nil {
			if len(s.Items.JSONSchemas) > 0 {
				t.Errorf("%s: tuple-typed items are not understood by this test", n.path)
			}
			if s.Items.Schema != nil {
				add(n, n.path+"[i]", true, s.Items.Schema)
			}
		}
	}
	walk(nil, root)
	return nodes
}

// docsIsResourceRef recognises PKO's ResourceRef by its shape, wherever it is used.
func docsIsResourceRef(s *apiextensionsv1.JSONSchemaProps) bool {
	for _, p := range []string{"type", "secret", "literal", "env", "filesystem"} {
		if _, ok := s.Properties[p]; !ok {
			return false
		}
	}
	return true
}

// docsCoverage returns whether a field is documented: listed itself; beneath a listed
// subtree documented as a whole; a scalar list item or map value of a listed container;
// listed relative to its ResourceRef; or an object all of whose fields are documented.
func docsCoverage(listed, rel map[string]int, whole map[string]bool) func(*docsNode) bool {
	memo := map[*docsNode]bool{}
	var covered func(*docsNode) bool
	covered = func(n *docsNode) bool {
		if c, ok := memo[n]; ok {
			return c
		}
		c := func() bool {
			if _, ok := listed[n.path]; ok {
				return true
			}
			for a := n.parent; a != nil; a = a.parent {
				if _, ok := listed[a.path]; ok && whole[a.path] {
					return true
				}
			}
			if n.element && len(n.children) == 0 && n.parent != nil {
				if _, ok := listed[n.parent.path]; ok {
					return true
				}
			}
			for a := n.parent; a != nil; a = a.parent {
				if a.resourceRef {
					if _, ok := rel[strings.TrimPrefix(n.path, a.path+".")]; ok {
						return true
					}
					break
				}
			}
			if len(n.children) == 0 {
				return false
			}
			for _, ch := range n.children {
				if !covered(ch) {
					return false
				}
			}
			return true
		}()
		memo[n] = c
		return c
	}
	return covered
}

// docsCheckVersionsAlike fails when served versions of a kind differ in more than their
// descriptions: docs/api.md documents one schema per kind.
func docsCheckVersionsAlike(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	var first *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if !v.Served || v.Schema == nil {
			continue
		}
		if first == nil {
			first = v
			continue
		}
		if diff := cmp.Diff(first.Schema.OpenAPIV3Schema, v.Schema.OpenAPIV3Schema,
			cmpopts.IgnoreFields(apiextensionsv1.JSONSchemaProps{}, "Description")); diff != "" {
			t.Errorf("%s %s and %s serve different schemas, but docs/api.md documents one (-%s +%s):\n%s",
				crd.Spec.Names.Kind, first.Name, v.Name, first.Name, v.Name, diff)
		}
	}
}

func docsReadCRDs(t *testing.T, dir string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		crds = append(crds, crd)
	}
	if len(crds) < 3 {
		t.Fatalf("found only %d CRDs in %s", len(crds), dir)
	}
	return crds
}

// docsAPI is what docs/api.md's field tables list.
type docsAPI struct {
	// abs maps kind to the absolute paths listed for it, each with its line.
	abs map[string]map[string]int
	// rel maps kind to the paths listed in its ResourceRef section, relative to a ResourceRef.
	rel      map[string]map[string]int
	problems []string
	badPKO   []string
}

var (
	docsBacktickRE    = regexp.MustCompile("`([^`]*)`")
	docsPlaceholderRE = regexp.MustCompile(`<[^<>.]+>`)
	docsIndexRE       = regexp.MustCompile(`\[[^\[\].]*\]`)
	docsPathRE        = regexp.MustCompile(`^(?:[A-Za-z_][A-Za-z0-9_]*|<k>)(?:\[i\])*(?:\.(?:[A-Za-z_][A-Za-z0-9_]*|<k>)(?:\[i\])*)*$`)
)

// docsParseAPI reads the rows of every table whose first column is "JSON path", attributing
// each to the kind of the "## <Kind> …" section it is in.
func docsParseAPI(t *testing.T, file string) docsAPI {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	d := docsAPI{abs: map[string]map[string]int{}, rel: map[string]map[string]int{}}
	var kind, subsection string
	inTable, fieldTable, pkoCol, fence := false, false, -1, false
	for i, line := range strings.Split(string(b), "\n") {
		lineNo := i + 1
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if fence {
			continue
		}
		switch {
		case strings.HasPrefix(line, "## "):
			var gv string
			kind, gv, _ = strings.Cut(strings.TrimPrefix(line, "## "), " ")
			group, _, _ := strings.Cut(strings.Trim(gv, "()`"), "/")
			kind = docsKind(kind, group)
			subsection = ""
		case strings.HasPrefix(line, "### "):
			subsection = strings.TrimSpace(strings.TrimPrefix(line, "### "))
		}
		if !strings.HasPrefix(strings.TrimSpace(line), "|") {
			inTable = false
			continue
		}
		cells := docsCells(line)
		if !inTable {
			inTable, fieldTable, pkoCol = true, cells[0] == "JSON path", slices.Index(cells, "PKO")
			continue
		}
		if !fieldTable || strings.Trim(cells[0], "-: ") == "" {
			continue
		}
		where := fmt.Sprintf("docs/api.md:%d", lineNo)
		spans := docsBacktickRE.FindAllStringSubmatch(cells[0], -1)
		if !strings.HasPrefix(cells[0], "`") || len(spans) == 0 {
			d.problems = append(d.problems, fmt.Sprintf("%s: first cell %q does not start with a backticked path", where, cells[0]))
			continue
		}
		if kind == "" {
			d.problems = append(d.problems, fmt.Sprintf("%s: %q is outside any \"## <Kind>\" section", where, cells[0]))
			continue
		}
		if pkoCol >= 0 {
			if pkoCol >= len(cells) || !slices.ContainsFunc(docsPKOValues, func(v string) bool { return strings.HasPrefix(cells[pkoCol], v) }) {
				got := ""
				if pkoCol < len(cells) {
					got = cells[pkoCol]
				}
				d.badPKO = append(d.badPKO, fmt.Sprintf("%s: %s %s: %q", where, kind, cells[0], got))
			}
		}
		into := d.abs
		if subsection == "ResourceRef" {
			into = d.rel
		}
		if into[kind] == nil {
			into[kind] = map[string]int{}
		}
		for _, s := range spans {
			paths, err := docsExpand(kind, s[1])
			if err != nil {
				d.problems = append(d.problems, fmt.Sprintf("%s: %v", where, err))
				continue
			}
			for _, p := range paths {
				into[kind][p] = lineNo
			}
		}
	}
	return d
}

func docsCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	line = strings.ReplaceAll(line, `\|`, "\x00")
	cells := strings.Split(line, "|")
	for i, c := range cells {
		cells[i] = strings.TrimSpace(strings.ReplaceAll(c, "\x00", "|"))
	}
	return cells
}

// docsExpand turns a path as the doc writes it into the schema paths it stands for:
// "…" for a Program resource, {a,b} for alternatives, any <…> for a map key and any [x]
// for a list index.
func docsExpand(kind, raw string) ([]string, error) {
	p := raw
	if rest, ok := strings.CutPrefix(p, "…"); ok {
		if kind != "Program" {
			return nil, fmt.Errorf("%q: a leading … only means %s in the Program section", raw, docsProgramResourcePrefix)
		}
		p = docsProgramResourcePrefix + rest
	}
	p = docsPlaceholderRE.ReplaceAllString(p, "<k>")
	p = docsIndexRE.ReplaceAllString(p, "[i]")
	paths := []string{p}
	for {
		var next []string
		expanded := false
		for _, q := range paths {
			open := strings.Index(q, "{")
			if open < 0 {
				next = append(next, q)
				continue
			}
			closing := strings.Index(q[open:], "}")
			if closing < 0 {
				return nil, fmt.Errorf("%q: unclosed {", raw)
			}
			expanded = true
			for alt := range strings.SplitSeq(q[open+1:open+closing], ",") {
				next = append(next, q[:open]+strings.TrimSpace(alt)+q[open+closing+1:])
			}
		}
		paths = next
		if !expanded {
			break
		}
	}
	for _, q := range paths {
		if !docsPathRE.MatchString(q) {
			return nil, fmt.Errorf("%q is not a field path (read as %q)", raw, q)
		}
	}
	return paths, nil
}
