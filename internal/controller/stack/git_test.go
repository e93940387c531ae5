package stack_test

import (
	"testing"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

func gitProgram(content string) map[string]string {
	return map[string]string{
		"README.md": "a repository whose Pulumi project lives in infra/\n",
		"infra/Pulumi.yaml": `name: app
runtime: yaml
resources:
  f:
    type: stackwright-testing:index:File
    properties:
      path: app.txt
      content: ` + content + "\n",
	}
}

// Git Stacks against a real smart-HTTP server with basic auth: a branch Stack deploys and
// rolls out a new commit by itself; a pinned commit stays put; wrong credentials give a
// clear condition naming the Secret.
func TestStackReconciler_Reconcile_GitBranchAndCommit(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	served := t.TempDir()
	repo, first := gitserver.NewRepo(t, served, "app", gitProgram("v1"))
	server := gitserver.NewHTTPServer(t, served, map[string]string{"bot": "s3cret"})
	s.create(secretOf(s.ns, "git-creds", map[string]string{"user": "bot", "password": "s3cret", "wrong": "nope"}))

	gitStack := func(name, password string, src pulumiv1.GitSource) *pulumiv1.Stack {
		return s.gitStack(name, server.URL+"/app.git", src, &pulumiv1.GitAuthConfig{BasicAuth: &pulumiv1.BasicAuth{
			UserName: secretRefOf("git-creds", "user"), Password: secretRefOf("git-creds", password),
		}})
	}
	tracking := gitStack("tracking", "password", pulumiv1.GitSource{Branch: "main"})
	pinned := gitStack("pinned", "password", pulumiv1.GitSource{Commit: first})
	pinned.Spec.EnvRefs["STACKWRIGHT_TESTING_ROOT"] = literal(t.TempDir())
	denied := gitStack("denied", "wrong", pulumiv1.GitSource{Branch: "main"})
	for _, st := range []*pulumiv1.Stack{tracking, pinned, denied} {
		s.create(st)
	}

	st := s.waitReady("tracking")
	s.g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal(first))
	content, err := s.readFile("app.txt")
	s.g.Expect(err).NotTo(HaveOccurred())
	s.g.Expect(content).To(Equal("v1"))
	s.g.Expect(s.waitReady("pinned").Status.LastUpdate.LastSuccessfulCommit).To(Equal(first))

	got := s.waitCondition("denied", pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonSourceUnavailable)
	msg := apimeta.FindStatusCondition(got.Status.Conditions, pulumiv1.ConditionReady).Message
	s.g.Expect(msg).To(ContainSubstring("git-creds"))
	s.g.Expect(msg).NotTo(ContainSubstring("nope"))
	s.g.Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, pulumiv1.ConditionStalled)).To(BeFalse())

	// A new commit is rolled out without touching the Stack; the pinned one does not move.
	second := repo.Commit(gitProgram("v2"))
	s.eventually(func(g Gomega) {
		content, err := s.readFile("app.txt")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(content).To(Equal("v2"))
	})
	st = s.waitReady("tracking")
	s.g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal(second))
	s.g.Expect(s.get(s.g, "pinned").Status.LastUpdate.LastSuccessfulCommit).To(Equal(first))
	s.g.Expect(s.updates("pinned")).To(HaveLen(1))
	listings := server.Counts()[0]
	// Three Stacks, two credentials, a handful of polls: far fewer listings than reconciles.
	s.g.Expect(listings).To(BeNumerically("<", 20))
}

// gitStack is a Stack named name running the project in infra/ of repoURL, at src's branch
// or commit, with auth, polling every 10 s.
func (s *scenario) gitStack(name, repoURL string, src pulumiv1.GitSource, auth *pulumiv1.GitAuthConfig) *pulumiv1.Stack {
	st := s.stack(name, "")
	st.Spec.Stack = name
	st.Spec.ProgramRef = nil
	src.ProjectRepo, src.RepoDir, src.GitAuth = repoURL, "infra", auth
	st.Spec.GitSource = src
	st.Spec.ResyncFrequencySeconds = 10
	return st
}
