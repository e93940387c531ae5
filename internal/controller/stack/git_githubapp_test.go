package stack_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/testing/githubapi"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// Git Stacks authenticating as a GitHub App against a GitHub Enterprise-like HTTPS host
// (git that accepts only the app's unexpired installation tokens, and the token endpoint
// under /api/v3 on the same host): two Stacks deploy with one minted token and roll out a
// push with it; a wrong key leaves its Stack SourceUnavailable with a message that names
// the Secret and says what GitHub refused. Neither key nor token reaches a Stack's status,
// an event, an Update, a log line or a metric.
func TestStackReconciler_Reconcile_GitHubApp(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	served := t.TempDir()
	repo, first := gitserver.NewRepo(t, served, "app", gitProgram("v1"))
	app := githubapi.NewApp(t, 4242, 777, time.Hour, nil)
	// A prefix no other test uses: tokens are looked for in the package's shared logs.
	app.TokenPrefix = "canary" + s.ns
	server := gitserver.NewHTTPServerWith(t, served, gitserver.Options{
		TLS: true, Authorize: app.Valid, Handlers: map[string]http.Handler{"/api/v3/": app},
	})
	wrongKey := githubapi.EncodeKey(githubapi.NewKey(t))
	s.create(secretOf(s.ns, "github-app", map[string]string{"appID": "4242", "installationID": "777", "privateKey": app.PrivateKeyPEM}))
	s.create(secretOf(s.ns, "wrong-app", map[string]string{"appID": "4242", "installationID": "777", "privateKey": wrongKey}))

	appStack := func(name, secret string, src pulumiv1.GitSource) *pulumiv1.Stack {
		return s.gitStack(name, server.URL+"/app.git", src, &pulumiv1.GitAuthConfig{GitHubApp: &pulumiv1.GitHubAppAuth{
			AppID: secretRefOf(secret, "appID"), InstallationID: secretRefOf(secret, "installationID"), PrivateKey: secretRefOf(secret, "privateKey"),
		}})
	}
	tracking := appStack("tracking", "github-app", pulumiv1.GitSource{Branch: "main"})
	pinned := appStack("pinned", "github-app", pulumiv1.GitSource{Commit: first})
	pinned.Spec.EnvRefs["STACKWRIGHT_TESTING_ROOT"] = literal(t.TempDir())
	denied := appStack("denied", "wrong-app", pulumiv1.GitSource{Branch: "main"})
	for _, st := range []*pulumiv1.Stack{tracking, pinned, denied} {
		s.create(st)
	}

	st := s.waitReady("tracking")
	s.g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal(first))
	s.g.Expect(s.readFile("app.txt")).To(Equal("v1"))
	s.g.Expect(s.waitReady("pinned").Status.LastUpdate.LastSuccessfulCommit).To(Equal(first))

	got := s.waitCondition("denied", pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonSourceUnavailable)
	msg := apimeta.FindStatusCondition(got.Status.Conditions, pulumiv1.ConditionReady).Message
	s.g.Expect(msg).To(And(ContainSubstring(`Secret "wrong-app"`), ContainSubstring("refused the app's credentials (401 Unauthorized)")))
	s.g.Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, pulumiv1.ConditionStalled)).To(BeFalse())

	// A push is rolled out with the token already minted.
	second := repo.Commit(gitProgram("v2"))
	s.eventually(func(g Gomega) {
		content, err := s.readFile("app.txt")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(content).To(Equal("v2"))
	})
	s.g.Expect(s.waitReady("tracking").Status.LastUpdate.LastSuccessfulCommit).To(Equal(second))
	issued := app.Issued()
	s.g.Expect(issued).To(HaveLen(1), "two Stacks of one namespace on one app should share one token")
	s.g.Expect(server.Refused()).To(BeZero(), "no token should have been refused by git")

	families, err := ctrlmetrics.Registry.Gather()
	s.g.Expect(err).NotTo(HaveOccurred())
	haystacks := map[string]string{
		"logs":    kubetest.Logs.String(),
		"events":  mustJSON(t, s.events()),
		"metrics": mustJSON(t, families),
	}
	for _, name := range []string{"tracking", "pinned", "denied"} {
		haystacks["stack "+name] = mustJSON(t, s.get(s.g, name))
		haystacks["updates of "+name] = mustJSON(t, s.updates(name))
	}
	needles := append(pemLines(app.PrivateKeyPEM), pemLines(wrongKey)...)
	needles = append(needles, issued...)
	needles = append(needles, app.TokenPrefix)
	for where, text := range haystacks {
		for _, needle := range needles {
			s.g.Expect(text).NotTo(ContainSubstring(needle), "a private key or token leaked into %s", where)
		}
	}
}

// pemLines are the base64 lines of a PEM block, any of which would betray the key.
func pemLines(pem string) []string {
	var out []string
	for line := range strings.SplitSeq(pem, "\n") {
		if len(line) > 8 && !strings.HasPrefix(line, "-----") {
			out = append(out, line)
		}
	}
	return out
}
