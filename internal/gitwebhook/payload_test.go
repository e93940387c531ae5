package gitwebhook

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBranchOf_Ref_TellsBranchesFromOtherRefs(t *testing.T) {
	tests := []struct {
		name       string
		ref        string
		wantBranch string
		wantOK     bool
	}{
		{name: "fullBranchRef", ref: "refs/heads/main", wantBranch: "main", wantOK: true},
		{name: "branchWithSlashes", ref: "refs/heads/feature/x", wantBranch: "feature/x", wantOK: true},
		{name: "shortName", ref: "feature/x", wantBranch: "feature/x", wantOK: true},
		{name: "emptyMeansEveryBranch", ref: "", wantBranch: "", wantOK: true},
		{name: "tagIsNoBranch", ref: "refs/tags/v1", wantBranch: "refs/tags/v1", wantOK: false},
		{name: "mergeRequestIsNoBranch", ref: "refs/merge-requests/1/head", wantBranch: "refs/merge-requests/1/head", wantOK: false},
		{name: "bareHeadsPrefixIsNoBranch", ref: "refs/heads/", wantBranch: "", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			branch, ok := branchOf(tt.ref)
			if diff := cmp.Diff([]any{tt.wantBranch, tt.wantOK}, []any{branch, ok}); diff != "" {
				t.Errorf("branchOf(%q) (-want +got):\n%s", tt.ref, diff)
			}
		})
	}
}

func TestRepoKeys_URLs_OneKeyPerRepository(t *testing.T) {
	got := repoKeys("https://github.com/acme/infra.git", "git@github.com:acme/infra.git", "", "not a url", "https://github.com/acme/infra", "https://api.github.com/repos/acme/infra")
	if diff := cmp.Diff([]string{"github.com/acme/infra", "api.github.com/repos/acme/infra"}, got); diff != "" {
		t.Errorf("repoKeys (-want +got):\n%s", diff)
	}
}

func TestValidToken_Proof_MatchesOnlyTheToken(t *testing.T) {
	tests := []struct {
		name  string
		proof string
		want  bool
	}{
		{name: "sameToken", proof: "tok", want: true},
		{name: "prefix", proof: "to", want: false},
		{name: "longer", proof: "tok ", want: false},
		{name: "empty", proof: "", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := validToken(tt.proof, nil, []byte("tok")); got != tt.want {
				t.Errorf("validToken(%q) = %v, want %v", tt.proof, got, tt.want)
			}
		})
	}
}
