package stackset

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/forge"
)

// element is one thing a generator yields: its identity and the values of its
// placeholders.
type element struct {
	// id is what the generator calls it: a branch, a directory ("" is the root), a list
	// element's name.
	id string
	// values are the placeholders' values, by name without braces.
	values map[string]string
	// revision is what revives the element's expired Stack when it changes: a branch's
	// commit; "" for the others, which stay expired until they disappear.
	revision string
}

// maxStackName keeps a Stack's name a label value, as its Updates' Stack label needs.
const maxStackName = 63

var unsafeRun = regexp.MustCompile(`[^a-z0-9]+`)

// slug is s in lower case with every run of other characters than letters and digits made
// one dash, trimmed of dashes: a DNS label's alphabet.
func slug(s string) string {
	return strings.Trim(unsafeRun.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

// elementKey is a short hash of an element's identity: the label value that finds its
// Stack, whatever the identity's characters or length.
func elementKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])[:16]
}

// stackName is the Stack of set's element id: <set>-<slug of id>, readable and stable. A
// hash of the identity is added whenever the slug is not the identity itself (two branches
// may slug alike: feature/a and feature-a) or the name is shortened to fit.
func stackName(set, id string) string {
	s := slug(id)
	if s == "" {
		s = "root"
	}
	base := set + "-" + s
	if s == id && len(base) <= maxStackName {
		return base
	}
	suffix := "-" + elementKey(id)[:8]
	if len(base) > maxStackName-len(suffix) {
		base = strings.TrimRight(base[:maxStackName-len(suffix)], "-")
	}
	return base + suffix
}

// matches reports whether name is kept by the include and exclude globs.
func matches(name string, include, exclude []string) (bool, error) {
	in := len(include) == 0
	for _, g := range include {
		ok, err := path.Match(g, name)
		if err != nil {
			return false, fmt.Errorf("include %q: %w", g, err)
		}
		in = in || ok
	}
	for _, g := range exclude {
		ok, err := path.Match(g, name)
		if err != nil {
			return false, fmt.Errorf("exclude %q: %w", g, err)
		}
		if ok {
			return false, nil
		}
	}
	return in, nil
}

// branchElements are the elements of the branches (name → commit) the generator keeps.
func branchElements(g *v1alpha1.GitBranchesGenerator, branches map[string]string) ([]element, error) {
	var out []element
	for b, commit := range branches {
		ok, err := matches(b, g.Include, g.Exclude)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, element{id: b, values: map[string]string{"branch": b, "branchSlug": slug(b), "commit": commit}, revision: commit})
		}
	}
	return out, nil
}

// directoryElements are the elements of the project directories the generator keeps.
func directoryElements(g *v1alpha1.GitDirectoriesGenerator, commit string, dirs []string) ([]element, error) {
	var out []element
	for _, d := range dirs {
		ok, err := matches(d, g.Include, g.Exclude)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, element{id: d, values: map[string]string{
				"path": d, "pathBase": path.Base("/" + d), "pathSlug": slug(d), "branch": g.Branch, "commit": commit,
			}})
		}
	}
	return out, nil
}

// listElements are the list's elements.
func listElements(g *v1alpha1.ListGenerator) []element {
	out := make([]element, 0, len(g.Elements))
	for _, e := range g.Elements {
		v := map[string]string{"name": e.Name}
		for k, val := range e.Values {
			v["values."+k] = val
		}
		out = append(out, element{id: e.Name, values: v})
	}
	return out
}

// prElements are the elements of the open pull requests the generator keeps, and
// how many were left out for coming from a fork.
func prElements(g *v1alpha1.PullRequestsGenerator, prs []forge.PullRequest, forks bool) ([]element, int, error) {
	var title *regexp.Regexp
	if g.Title != "" {
		re, err := regexp.Compile(g.Title)
		if err != nil {
			return nil, 0, fmt.Errorf("title: %w", err)
		}
		title = re
	}
	var out []element
	skipped := 0
	for _, pr := range prs {
		ok, err := matches(pr.BaseBranch, g.TargetBranches, nil)
		if err != nil {
			return nil, 0, fmt.Errorf("targetBranches: %w", err)
		}
		if !ok || !hasAll(pr.Labels, g.Labels) || hasAny(pr.Labels, g.NotLabels) || (title != nil && !title.MatchString(pr.Title)) {
			continue
		}
		if pr.Fork && !forks {
			skipped++
			continue
		}
		n := strconv.Itoa(pr.Number)
		out = append(out, element{id: n, revision: pr.HeadSHA, values: map[string]string{
			"number": n, "branch": pr.HeadBranch, "branchSlug": slug(pr.HeadBranch), "headSHA": pr.HeadSHA,
			"headRef": pr.HeadRef, "baseBranch": pr.BaseBranch, "author": pr.Author, "labels": strings.Join(pr.Labels, ","),
		}})
	}
	return out, skipped, nil
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func hasAny(have, unwanted []string) bool {
	return slices.ContainsFunc(unwanted, func(u string) bool { return slices.Contains(have, u) })
}
