package stackset

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

func TestStackName_Elements_ValidStableAndDistinct(t *testing.T) {
	tests := []struct {
		name, set, id, want string
	}{
		{name: "plainNameKeptAsIs", set: "envs", id: "dev", want: "envs-dev"},
		{name: "slashGetsAHash", set: "review", id: "feature/a", want: "review-feature-a-" + elementKey("feature/a")[:8]},
		{name: "rootDirectory", set: "mono", id: "", want: "mono-root-" + elementKey("")[:8]},
		{name: "oddCharacters", set: "review", id: "feature/Ünïcode__Name.v2+x", want: "review-feature-n-code-name-v2-x-" + elementKey("feature/Ünïcode__Name.v2+x")[:8]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := stackName(tt.set, tt.id); got != tt.want {
				t.Errorf("stackName(%q, %q) = %q, want %q", tt.set, tt.id, got, tt.want)
			}
		})
	}
	long := strings.Repeat("x", 200)
	for _, pair := range [][2]string{{"feature/a", "feature-a"}, {long + "1", long + "2"}} {
		a, b := stackName("s", pair[0]), stackName("s", pair[1])
		if a == b {
			t.Errorf("%q and %q share the Stack name %q", pair[0], pair[1], a)
		}
		for _, n := range []string{a, b} {
			if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
				t.Errorf("stackName %q is not a valid label: %v", n, errs)
			}
		}
	}
}

func TestMatches_Globs_IncludeThenExclude(t *testing.T) {
	tests := []struct {
		name             string
		branch           string
		include, exclude []string
		want             bool
	}{
		{name: "noIncludeKeepsAll", branch: "main", want: true},
		{name: "includeMatches", branch: "feature/a", include: []string{"feature/*"}, want: true},
		{name: "starStopsAtSlash", branch: "feature/a/b", include: []string{"feature/*"}},
		{name: "includeMisses", branch: "fix/x", include: []string{"feature/*"}},
		{name: "excludeWins", branch: "feature/wip", include: []string{"feature/*"}, exclude: []string{"*/wip"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := matches(tt.branch, tt.include, tt.exclude)
			if err != nil || got != tt.want {
				t.Errorf("matches() = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if _, err := matches("x", []string{"["}, nil); err == nil {
		t.Error("a malformed glob is accepted")
	}
}

func TestRender_Placeholders_SubstitutedOrRefused(t *testing.T) {
	e := element{id: "feature/a", values: map[string]string{"branch": "feature/a", "branchSlug": "feature-a"}}
	tests := []struct {
		name, spec, wantStack, wantBranch, wantErr string
	}{
		{name: "substituted", spec: `{"stack":"{{ branchSlug }}","projectRepo":"https://x","branch":"{{branch}}"}`, wantStack: "feature-a", wantBranch: "feature/a"},
		{name: "unknownPlaceholder", spec: `{"stack":"{{path}}"}`, wantErr: "placeholders the generator does not have: [path]"},
		{name: "unknownField", spec: `{"stack":"s","brnch":"x"}`, wantErr: `unknown field "brnch"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := render(&v1alpha1.StackSetTemplate{Spec: apiextensionsv1.JSON{Raw: []byte(tt.spec)}}, e)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("render() error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([2]string{tt.wantStack, tt.wantBranch}, [2]string{spec.Stack, spec.Branch}); diff != "" {
				t.Errorf("stack, branch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSkipExpired_Elements_HeldUntilTheyChange(t *testing.T) {
	branch := func(id, commit string) element {
		return element{id: id, values: map[string]string{"branch": id, "commit": commit}, revision: commit}
	}
	expiring := func(id, ran string) pulumiv1.Stack {
		now := metav1.Now()
		return pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now, Annotations: map[string]string{v1alpha1.StackSetElementAnnotation: id}},
			Status: pulumiv1.StackStatus{
				Stackwright: &pulumiv1.StackwrightStatus{ExpiredAt: &now},
				LastUpdate:  &pulumiv1.StackUpdateState{LastAttemptedCommit: ran},
			},
		}
	}
	tests := []struct {
		name        string
		recorded    []v1alpha1.ExpiredElement
		elems       []element
		stacks      []pulumiv1.Stack
		wantElems   []string
		wantExpired []v1alpha1.ExpiredElement
	}{
		{name: "expiringStackIsRecordedAndSkipped", elems: []element{branch("a", "1"), branch("b", "1")}, stacks: []pulumiv1.Stack{expiring("a", "1")},
			wantElems: []string{"b"}, wantExpired: []v1alpha1.ExpiredElement{{Element: "a", Commit: "1"}}},
		{name: "pushWhileTheExpiredStackIsDestroyedRevives", elems: []element{branch("a", "2")}, stacks: []pulumiv1.Stack{expiring("a", "1")},
			wantElems: []string{"a"}},
		{name: "listElementStaysExpired", elems: []element{{id: "dev"}}, stacks: []pulumiv1.Stack{expiring("dev", "")},
			wantExpired: []v1alpha1.ExpiredElement{{Element: "dev"}}},
		{name: "sameCommitStaysSkipped", recorded: []v1alpha1.ExpiredElement{{Element: "a", Commit: "1"}}, elems: []element{branch("a", "1")},
			wantExpired: []v1alpha1.ExpiredElement{{Element: "a", Commit: "1"}}},
		{name: "newCommitRevives", recorded: []v1alpha1.ExpiredElement{{Element: "a", Commit: "1"}}, elems: []element{branch("a", "2")}, wantElems: []string{"a"}},
		{name: "goneElementIsForgotten", recorded: []v1alpha1.ExpiredElement{{Element: "a", Commit: "1"}}, elems: []element{branch("b", "1")}, wantElems: []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := &v1alpha1.StackSet{Status: v1alpha1.StackSetStatus{Expired: tt.recorded}}
			var got []string
			for _, e := range skipExpired(set, tt.elems, tt.stacks) {
				got = append(got, e.id)
			}
			if diff := cmp.Diff(tt.wantElems, got); diff != "" {
				t.Errorf("elements (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantExpired, set.Status.Expired, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("expired (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRemovalLimit_Bound_PercentRoundsUpNumberIsExact(t *testing.T) {
	tests := []struct {
		name  string
		bound intstr.IntOrString
		n     int
		want  int
	}{
		{name: "halfOfFour", bound: intstr.FromString("50%"), n: 4, want: 2},
		{name: "halfOfThreeRoundsUp", bound: intstr.FromString("50%"), n: 3, want: 2},
		{name: "oneStackMayGo", bound: intstr.FromString("50%"), n: 1, want: 1},
		{name: "zeroPercentStillAllowsOne", bound: intstr.FromString("0%"), n: 10, want: 1},
		{name: "zeroNumberRemovesNothing", bound: intstr.FromInt32(0), n: 10, want: 0},
		{name: "number", bound: intstr.FromInt32(3), n: 10, want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := removalLimit(tt.bound, tt.n)
			if err != nil || got != tt.want {
				t.Errorf("removalLimit(%s, %d) = %d, %v; want %d", tt.bound.String(), tt.n, got, err, tt.want)
			}
		})
	}
	if _, err := removalLimit(intstr.FromString("half"), 4); err == nil {
		t.Error("a malformed bound is accepted")
	}
}

// hold keeps every Stack whose element is gone once more are gone than the bound allows,
// and all of them when the bound cannot be read.
func TestHold_Bound_HoldsAllOrNone(t *testing.T) {
	gone := func(names ...string) []*pulumiv1.Stack {
		out := make([]*pulumiv1.Stack, 0, len(names))
		for _, n := range names {
			out = append(out, &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		return out
	}
	tests := []struct {
		name      string
		gone      []*pulumiv1.Stack
		bound     intstr.IntOrString
		wantNames []string
		wantErr   bool
		wantNil   bool
	}{
		{name: "withinTheBound", gone: gone("s-a", "s-b"), bound: intstr.FromString("50%"), wantNil: true},
		{name: "beyondTheBound", gone: gone("s-b", "s-a", "s-c"), bound: intstr.FromString("50%"), wantNames: []string{"s-b", "s-a", "s-c"}},
		{name: "zeroHoldsEveryRemoval", gone: gone("s-a"), bound: intstr.FromInt32(0), wantNames: []string{"s-a"}},
		{name: "unreadableBound", gone: gone("s-a"), bound: intstr.FromString("half"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := hold(tt.gone, tt.bound, 4)
			if got == nil {
				if !tt.wantNil {
					t.Fatal("hold() = nil; want the Stacks held")
				}
				return
			}
			if tt.wantNil {
				t.Fatalf("hold() = %+v; want nil", got)
			}
			if diff := cmp.Diff(tt.wantNames, got.names, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if (got.err != nil) != tt.wantErr || got.of != 4 || got.bound != tt.bound {
				t.Errorf("hold() = %+v; want err %v, of 4, bound %s", got, tt.wantErr, tt.bound.String())
			}
		})
	}
}
