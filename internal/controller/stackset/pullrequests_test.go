package stackset_test

import (
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/gitea"
)

// marker is the hidden line of the Stack's comment (the set's feedback finds it by it).
func marker(ns, stack string) string { return "<!-- stackwright:feedback " + ns + "/" + stack + " -->" }

// One Stack per open pull request of a repository on a real Gitea, each told to the pull
// request: a pending status and one comment at once, the comment edited in place (never a
// second) with the preview's changes once it succeeds, then on a new head, then with a
// failure's message; a fork's pull request gets no Stack; closing the pull request removes
// its Stack and the comment says so. The test plays the Stack controller (it records each
// run in the Stack's status and its Update).
func TestReconciler_Reconcile_PullRequestPreviewsOnGitea(t *testing.T) {
	t.Parallel()
	forge := gitea.Start(t)
	s := newScenario(t)
	repo := forge.CreateRepo("app")
	repo.Push("main", "", map[string]string{"Pulumi.yaml": project})
	head := repo.Push("feature/a", "main", map[string]string{"Pulumi.yaml": project + "description: a\n"})
	pr := repo.OpenPullRequest("feature/a", "main", "Add a", "")
	forkPR := openForkPullRequest(t, forge, repo)

	s.Create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "forge"}, StringData: map[string]string{"token": forge.Token}})
	set := &v1alpha1.StackSet{
		ObjectMeta: metav1.ObjectMeta{Name: "pr"},
		Spec: v1alpha1.StackSetSpec{
			Generator: v1alpha1.StackSetGenerator{PullRequests: &v1alpha1.PullRequestsGenerator{
				Forge: "Gitea", API: forge.URL + "/api/v1", Repository: repo.Owner + "/" + repo.Name,
				TokenSecretRef: v1alpha1.SecretKeyRef{Name: "forge"}, TargetBranches: []string{"main"}, Interval: every10s,
				// Asked for, but the namespace has no label of the platform's allowing it.
				Forks: v1alpha1.PullRequestForksAllow,
			}},
			Template: v1alpha1.StackSetTemplate{Spec: template(t, map[string]any{
				"stack": "pr-{{number}}", "projectRepo": repo.CloneURL, "commit": "{{headSHA}}", "preview": true,
			})},
			DeletionPolicy: v1alpha1.StackSetDestroy,
		},
	}
	s.Create(set)
	stack := "pr-1"

	// The pull request's Stack, at its head; the fork's gets none.
	var st pulumiv1.Stack
	s.Eventually(func(g Gomega) {
		stacks := s.live(g, set)
		g.Expect(stacks).To(HaveLen(1))
		st = stacks["1"]
		g.Expect(st.Name).To(Equal(stack))
		g.Expect(st.Spec.Commit).To(Equal(head))
		g.Expect(st.Spec.Preview).To(BeTrue())
		got := s.set(g, set)
		g.Expect(got.Status.SkippedForks).To(Equal(int32(1)), "fork pull request #%d", forkPR)
	})
	// Pending at once: a status on the head and one comment.
	feedback := func(sha, state string, in ...string) {
		t.Helper()
		s.Eventually(func(g Gomega) {
			var ours []gitea.Comment
			for _, c := range repo.Comments(pr.Number) {
				if strings.Contains(c.Body, marker(s.Namespace, stack)) {
					ours = append(ours, c)
				}
			}
			g.Expect(ours).To(HaveLen(1), "one comment of the Stack's, edited in place")
			for _, want := range in {
				g.Expect(ours[0].Body).To(ContainSubstring(want))
			}
			sts := repo.CommitStatuses(sha)
			g.Expect(sts).NotTo(BeEmpty())
			g.Expect(sts[0].Context).To(Equal("stackwright/" + stack))
			g.Expect(sts[0].State).To(Equal(state))
		})
	}
	feedback(head, "pending", "running", head[:12])

	// The preview succeeds: the comment has its changes by type, the status says success.
	s.ran(stack, "pr-1-1", head, pulumiv1.UpdateStateSucceeded, "", map[string]int64{"create": 1, "same": 1})
	feedback(head, "success", "**succeeded**", "`kubernetes:core/v1:ConfigMap` | 1 | 0 | 0 | 0 |", "1 to create, 1 unchanged", "Update `pr-1-1`")

	// A second push: the set renders the new head; the same comment goes back to pending.
	second := repo.Push("feature/a", "main", map[string]string{"Pulumi.yaml": project + "description: b\n"})
	s.Eventually(func(g Gomega) {
		g.Expect(s.live(g, set)["1"].Spec.Commit).To(Equal(second))
	})
	feedback(second, "pending", "running", second[:12])

	// Its preview fails: the comment quotes the error.
	s.ran(stack, "pr-1-2", second, pulumiv1.UpdateStateFailed, "error: resource 'cm' is invalid", nil)
	feedback(second, "failure", "**failed**", "error: resource 'cm' is invalid")
	got := &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Name: set.Name}}
	s.g.Expect(s.Get(got)).To(Succeed())
	s.g.Expect(got.Status.PullRequests).To(HaveLen(1))
	s.g.Expect(got.Status.PullRequests[0].Reported).To(Equal("failure of " + second[:12] + " by pr-1-2"))
	s.g.Expect(got.Status.PullRequests[0].Error).To(BeEmpty())

	// Closing the pull request removes its Stack, and the comment says so.
	repo.ClosePullRequest(pr.Number)
	s.WaitGone(&st)
	feedback(second, "failure", "the pull request is closed; its Stack is destroyed and deleted")
	s.Eventually(func(g Gomega) {
		g.Expect(s.set(g, set).Status.PullRequests).To(BeEmpty())
	})
}

// openForkPullRequest makes a second user fork repo, push a branch to the fork and open a
// pull request of it into repo's main, and returns its number.
func openForkPullRequest(t *testing.T, forge *gitea.Server, repo *gitea.Repo) int64 {
	t.Helper()
	forge.API(http.MethodPost, "/admin/users", map[string]any{
		"username": "eve", "email": "eve@example.com", "password": "eve-password-1", "must_change_password": false,
	}, nil)
	forge.API(http.MethodPost, "/repos/"+repo.Owner+"/"+repo.Name+"/forks?sudo=eve", map[string]any{}, nil)
	fork := forge.Repo("eve", repo.Name)
	fork.Push("fix", "main", map[string]string{"Pulumi.yaml": project + "description: from a fork\n"})
	var pr gitea.PullRequest
	forge.API(http.MethodPost, "/repos/"+repo.Owner+"/"+repo.Name+"/pulls?sudo=eve", map[string]any{"head": "eve:fix", "base": "main", "title": "From a fork"}, &pr)
	return pr.Number
}

// ran records, as the Stack controller would, that the Stack's Update update ran on commit
// and ended in state, with message and the changes (one step per change).
func (s *scenario) ran(stack, update, commit string, state pulumiv1.UpdateState, message string, changes map[string]int64) {
	s.t.Helper()
	u := &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: update},
		Spec:       v1alpha1.UpdateSpec{StackName: stack, Type: v1alpha1.UpdateTypePreview},
	}
	s.Create(u)
	base := u.DeepCopy()
	u.Status.Changes = changes
	for op, n := range changes {
		for range n {
			typ := "kubernetes:core/v1:ConfigMap"
			if op == "same" {
				typ = "pulumi:pulumi:Stack"
			}
			u.Status.Steps = append(u.Status.Steps, v1alpha1.UpdateStep{Op: op, URN: "urn:pulumi:dev::p::" + typ + "::x", Type: typ})
		}
	}
	s.g.Expect(env.Client.Status().Patch(s.t.Context(), u, client.MergeFrom(base))).To(Succeed())
	s.g.Eventually(func() error {
		st := &pulumiv1.Stack{}
		if err := env.Client.Get(s.t.Context(), client.ObjectKey{Namespace: s.Namespace, Name: stack}, st); err != nil {
			return err
		}
		prev := st.DeepCopy()
		st.Status.LastUpdate = &pulumiv1.StackUpdateState{Name: update, Type: string(v1alpha1.UpdateTypePreview), State: state, Message: message, LastAttemptedCommit: commit}
		return env.Client.Status().Patch(s.t.Context(), st, client.MergeFromWithOptions(prev, client.MergeFromWithOptimisticLock{}))
	}).Should(Succeed())
}
