package stackset

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/forge"
)

func TestPRElements_Filters_KeepWhatTheSetAsksFor(t *testing.T) {
	prs := []forge.PullRequest{
		{Number: 1, Title: "Add cache", BaseBranch: "main", HeadBranch: "feature/cache", HeadSHA: "a1", HeadRef: "refs/pull/1/head", Author: "ann", Labels: []string{"preview"}},
		{Number: 2, Title: "WIP: docs", BaseBranch: "main", HeadBranch: "docs", HeadSHA: "b2", HeadRef: "refs/pull/2/head", Author: "bob", Labels: []string{"preview", "do-not-run"}},
		{Number: 3, Title: "Backport", BaseBranch: "release/1", HeadBranch: "backport", HeadSHA: "c3", HeadRef: "refs/pull/3/head", Author: "cy"},
		{Number: 4, Title: "From a fork", BaseBranch: "main", HeadBranch: "main", HeadSHA: "d4", HeadRef: "refs/pull/4/head", Author: "eve", Labels: []string{"preview"}, Fork: true},
	}
	tests := []struct {
		name        string
		gen         v1alpha1.PullRequestsGenerator
		forks       bool
		want        []string
		wantSkipped int
		wantErr     string
	}{
		{name: "everyOwnPullRequest", want: []string{"1", "2", "3"}, wantSkipped: 1},
		{name: "forksWhenAllowed", forks: true, want: []string{"1", "2", "3", "4"}},
		{name: "targetBranches", gen: v1alpha1.PullRequestsGenerator{TargetBranches: []string{"release/*"}}, want: []string{"3"}},
		{name: "labelsAndNotLabels", gen: v1alpha1.PullRequestsGenerator{Labels: []string{"preview"}, NotLabels: []string{"do-not-run"}}, want: []string{"1"}, wantSkipped: 1},
		{name: "title", gen: v1alpha1.PullRequestsGenerator{Title: `^(?i)add`}, want: []string{"1"}},
		{name: "badTitle", gen: v1alpha1.PullRequestsGenerator{Title: `(`}, wantErr: "title"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			elems, skipped, err := prElements(&tt.gen, prs, tt.forks)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one about %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, e := range elems {
				ids = append(ids, e.id)
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("elements (-want +got):\n%s", diff)
			}
			if skipped != tt.wantSkipped {
				t.Errorf("skipped forks = %d, want %d", skipped, tt.wantSkipped)
			}
		})
	}
	elems, _, _ := prElements(&v1alpha1.PullRequestsGenerator{}, prs[:1], false)
	want := map[string]string{
		"number": "1", "branch": "feature/cache", "branchSlug": "feature-cache", "headSHA": "a1", "headRef": "refs/pull/1/head",
		"baseBranch": "main", "author": "ann", "labels": "preview",
	}
	if diff := cmp.Diff(want, elems[0].values); diff != "" {
		t.Errorf("placeholders (-want +got):\n%s", diff)
	}
	if elems[0].revision != "a1" {
		t.Errorf("revision = %q, want the head SHA (a push revives an expired Stack)", elems[0].revision)
	}
}

func TestVerdictOf_StackStatus_SaysWhatTheHeadGot(t *testing.T) {
	const head = "1111111111111111111111111111111111111111"
	stalled := []metav1.Condition{{Type: pulumiv1.ConditionStalled, Status: metav1.ConditionTrue, ObservedGeneration: 2, Message: "spec.backend is invalid"}}
	tests := []struct {
		name string
		st   *pulumiv1.Stack
		want verdict
	}{
		{name: "noStackYet", want: verdict{state: forge.StatePending, sha: head}},
		{
			name: "previewOfTheHeadSucceeded",
			st:   &pulumiv1.Stack{Status: pulumiv1.StackStatus{LastUpdate: &pulumiv1.StackUpdateState{Name: "pr-1-2", Type: "preview", State: pulumiv1.UpdateStateSucceeded, LastAttemptedCommit: head, Message: "1 to create"}}},
			want: verdict{state: forge.StateSuccess, sha: head, update: "pr-1-2", op: "preview", message: "1 to create"},
		},
		{
			name: "upOfTheHeadFailed",
			st:   &pulumiv1.Stack{Status: pulumiv1.StackStatus{LastUpdate: &pulumiv1.StackUpdateState{Name: "pr-1-3", Type: "up", State: pulumiv1.UpdateStateFailed, LastAttemptedCommit: head, Message: "boom"}}},
			want: verdict{state: forge.StateFailure, sha: head, update: "pr-1-3", op: "up", message: "boom"},
		},
		{
			name: "lastRunIsAnOlderHeadsAndTheHeadsRuns",
			st: &pulumiv1.Stack{Status: pulumiv1.StackStatus{
				LastUpdate:    &pulumiv1.StackUpdateState{Name: "pr-1-1", Type: "preview", State: pulumiv1.UpdateStateSucceeded, LastAttemptedCommit: "0000000000000000000000000000000000000000"},
				CurrentUpdate: &pulumiv1.CurrentStackUpdate{Name: "pr-1-2", Commit: head},
			}},
			want: verdict{state: forge.StatePending, sha: head, update: "pr-1-2"},
		},
		{
			name: "aDriftCheckOfTheHeadIsNotItsVerdict",
			st:   &pulumiv1.Stack{Status: pulumiv1.StackStatus{LastUpdate: &pulumiv1.StackUpdateState{Name: "pr-1-4", Type: "drift", State: pulumiv1.UpdateStateFailed, LastAttemptedCommit: head}}},
			want: verdict{state: forge.StatePending, sha: head},
		},
		{
			name: "stalledBeforeAnyRun",
			st:   &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Status: pulumiv1.StackStatus{Conditions: stalled}},
			want: verdict{state: forge.StateFailure, sha: head, message: "spec.backend is invalid"},
		},
		{
			name: "stalledForAnOlderGeneration",
			st:   &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Status: pulumiv1.StackStatus{Conditions: stalled}},
			want: verdict{state: forge.StatePending, sha: head},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, verdictOf(tt.st, head), cmp.AllowUnexported(verdict{})); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
		})
	}
}

func TestComment_Preview_ChangesByTypeAndQuotedError(t *testing.T) {
	set := &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "prs"}}
	u := &v1alpha1.Update{Status: v1alpha1.UpdateStatus{
		Changes: map[string]int64{"create": 2, "update": 1, "same": 4},
		Steps: []v1alpha1.UpdateStep{
			{Op: "create", Type: "kubernetes:core/v1:ConfigMap"},
			{Op: "create", Type: "kubernetes:core/v1:ConfigMap"},
			{Op: "update", Type: "kubernetes:apps/v1:Deployment"},
			{Op: "create", Type: "pulumi:providers:kubernetes"},
			{Op: "same", Type: "pulumi:pulumi:Stack"},
		},
	}}
	v := verdict{state: forge.StateSuccess, sha: "1234567890abcdef1234", update: "prs-1-1", op: "preview"}
	got := comment(set, "prs-1", v, u, "https://console.example.com/team-a/prs-1/prs-1-1")
	want := "<!-- stackwright:feedback team-a/prs-1 -->\n" +
		"✅ **Stackwright** preview of `1234567890ab` **succeeded** · Stack `team-a/prs-1` · Update `prs-1-1` · [details](https://console.example.com/team-a/prs-1/prs-1-1)\n" +
		"\n| Resource type | create | update | replace | delete |\n| --- | --- | --- | --- | --- |\n" +
		"| `kubernetes:apps/v1:Deployment` | 0 | 1 | 0 | 0 |\n" +
		"| `kubernetes:core/v1:ConfigMap` | 2 | 0 | 0 | 0 |\n" +
		"\n2 to create, 1 to update, 4 unchanged\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("comment (-want +got):\n%s", diff)
	}

	// A failure quotes the message in a fence it cannot close.
	failed := verdict{state: forge.StateFailure, sha: "1234567890abcdef1234", op: "preview", message: "error: ```\n[evil](http://x)"}
	got = comment(set, "prs-1", failed, nil, "")
	if !strings.Contains(got, "````\nerror: ```\n[evil](http://x)\n````") {
		t.Errorf("the message is not fenced safely:\n%s", got)
	}
	if desc := describe(v, u); desc != "Stackwright: preview succeeded: 2 to create, 1 to update, 4 unchanged" {
		t.Errorf("describe = %q", desc)
	}
}
