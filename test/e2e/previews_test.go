//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/cluster"
	"github.com/stackwright/stackwright/internal/testing/gitea"
)

// previewCanary is a secret the previews' program reads from its Stack's secret config: it
// must appear in no comment or commit status.
const previewCanary = "canary-4c2d9e7a-not-for-forges"

// previewProgram makes one ConfigMap named by the Stack's config, holding content and the
// canary; broken, it names a resource type that does not exist.
func previewProgram(content string, broken bool) string {
	typ := "kubernetes:core/v1:ConfigMap"
	if broken {
		typ = "kubernetes:core/v1:NoSuchKind"
	}
	return `name: previews
runtime: yaml
config:
  name: {type: string}
  canary: {type: string}
resources:
  cm:
    type: ` + typ + `
    properties:
      metadata:
        name: ${name}
      data:
        content: ` + content + `
        canary: ${canary}
`
}

// previewSetYAML is a StackSet of the pull requests of repo whose title matches title: preview
// only, or review stacks that deploy each pull request. Its interval is long: new heads
// reach it through the forge's webhook.
func previewSetYAML(name, api, repo, cloneURL, title string, preview bool) string {
	return `apiVersion: stackwright.dev/v1alpha1
kind: StackSet
metadata:
  name: ` + name + `
spec:
  generator:
    pullRequests:
      forge: Gitea
      api: ` + api + `
      repository: ` + repo + `
      tokenSecretRef: {name: forge-token}
      title: "` + title + `"
      interval: 10m
      feedback:
        url: "https://console.example.com/{{namespace}}/{{stack}}/{{update}}"
  deletionPolicy: Destroy
  template:
    spec:
      stack: ` + name + `-{{number}}
      projectRepo: ` + cloneURL + `
      commit: "{{headSHA}}"
      preview: ` + fmt.Sprint(preview) + `
      serviceAccountName: deployer
      destroyOnFinalize: true
      config:
        name: ` + name + `-{{number}}
      secretsRef:
        canary:
          type: Secret
          secret: {name: canary, key: value}
      envRefs:
` + indent(s3EnvRefsYAML, "    ")
}

// testPullRequestPreviews runs a real forge (Gitea, in the node's network) and a StackSet of
// its pull requests: a preview of each head reported on the pull request as one comment
// edited in place and a commit status, within seconds of a push through the forge's
// webhook; a failing preview reported as such; a fork's pull request not run; a review
// stack deployed and destroyed with its pull request; no secret in any comment or status.
func testPullRequestPreviews(t *testing.T, jc *jobCluster) {
	g, c := NewWithT(t), jc.c
	ctx := context.Background()
	const ns = "e2e-previews"
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	deleteStacksFirst(t, ns)

	forge := gitea.StartWith(t, gitea.Options{Host: cluster.NodeIP, Wrap: []string{"ip", "netns", "exec", cluster.NetNS}})
	repo := forge.CreateRepo("app")
	repo.Push("main", "", map[string]string{"Pulumi.yaml": previewProgram("main", false)})
	const webhookToken = "a-long-random-string"
	repo.AddWebhook("http://"+jc.gitWebhookIP+"/hooks/git/"+ns, webhookToken, "pull_request")
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, configMapWriterYAML+"---\n"+s3CredentialsYAML+`---
apiVersion: v1
kind: Secret
metadata: {name: stackwright-git-webhook}
stringData: {token: `+webhookToken+`}
---
apiVersion: v1
kind: Secret
metadata: {name: forge-token}
stringData: {token: `+forge.Token+`}
---
apiVersion: v1
kind: Secret
metadata: {name: canary}
stringData: {value: `+previewCanary+`}
`))
	api, full := forge.URL+"/api/v1", repo.Owner+"/"+repo.Name
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, previewSetYAML("preview", api, full, repo.CloneURL, "^Preview", true)+"---\n"+
		previewSetYAML("review", api, full, repo.CloneURL, "^Review", false)))

	// The Stack's comment on pull request number, and the newest status of sha.
	feedback := func(g Gomega, number int64, stack, sha string) (string, gitea.CommitStatus) {
		var ours []string
		for _, cm := range repo.Comments(number) {
			if strings.Contains(cm.Body, "<!-- stackwright:feedback "+ns+"/"+stack+" -->") {
				ours = append(ours, cm.Body)
			}
		}
		g.Expect(ours).To(HaveLen(1), "one comment per Stack, edited in place")
		var st gitea.CommitStatus
		for _, s := range repo.CommitStatuses(sha) {
			if s.Context == "stackwright/"+stack {
				st = s
				break
			}
		}
		return ours[0], st
	}
	waitFeedback := func(number int64, stack, sha, state string, in ...string) string {
		t.Helper()
		var body string
		NewWithT(t).Eventually(func(g Gomega) {
			var st gitea.CommitStatus
			body, st = feedback(g, number, stack, sha)
			g.Expect(st.State).To(Equal(state), "status of %s", sha)
			g.Expect(body).To(ContainSubstring(sha[:12]))
			for _, want := range in {
				g.Expect(body).To(ContainSubstring(want))
			}
		}).WithTimeout(2*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "feedback on #%d\n%s", number, describeNamespace(ns))
		return body
	}

	// A pull request opened: within two minutes, one comment with the preview and success.
	head := repo.Push("feature/a", "main", map[string]string{"Pulumi.yaml": previewProgram("a1", false)})
	opened := time.Now()
	pr := repo.OpenPullRequest("feature/a", "main", "Preview: a", "")
	body := waitFeedback(pr.Number, "preview-1", head, "success", "**succeeded**", "`kubernetes:core/v1:ConfigMap` | 1 | 0 | 0 | 0 |", "preview-1-")
	t.Logf("pull request opened → preview comment: %.1f s", time.Since(opened).Seconds())
	g.Expect(body).To(ContainSubstring("https://console.example.com/" + ns + "/preview-1/"))
	// A preview: nothing was made.
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "preview-1"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a preview made its ConfigMap (%v)", err)

	// Pushes to the pull request: each head's preview edits the one comment (the forge's
	// webhook brings the set's listing forward), and the status goes on the new head.
	var took []time.Duration
	for i := range 10 {
		sha := repo.Push("feature/a", "main", map[string]string{"Pulumi.yaml": previewProgram(fmt.Sprintf("a%d", i+2), false)})
		pushed := time.Now()
		waitFeedback(pr.Number, "preview-1", sha, "success", "**succeeded**", "`kubernetes:core/v1:ConfigMap` | 1 | 0 | 0 | 0 |")
		took = append(took, time.Since(pushed))
		head = sha
	}
	slices.Sort(took)
	t.Logf("push to the pull request → its comment updated (Gitea webhook, Job executor), 10 pushes: median %.2f s, p90 %.2f s, max %.2f s",
		took[4].Seconds(), took[8].Seconds(), took[9].Seconds())

	// A push that breaks the program: failure, and the comment says why.
	broken := repo.Push("feature/a", "main", map[string]string{"Pulumi.yaml": previewProgram("a-broken", true)})
	waitFeedback(pr.Number, "preview-1", broken, "failure", "**failed**", "NoSuchKind")

	// A fork's pull request: no Stack (the namespace has no label of the platform's).
	forge.API(http.MethodPost, "/admin/users", map[string]any{"username": "eve", "email": "eve@example.com", "password": "eve-password-1", "must_change_password": false}, nil)
	forge.API(http.MethodPost, "/repos/"+full+"/forks?sudo=eve", map[string]any{}, nil)
	forge.Repo("eve", repo.Name).Push("fix", "main", map[string]string{"Pulumi.yaml": previewProgram("from a fork", false)})
	var forkPR gitea.PullRequest
	forge.API(http.MethodPost, "/repos/"+full+"/pulls?sudo=eve", map[string]any{"head": "eve:fix", "base": "main", "title": "Preview: from a fork"}, &forkPR)
	g.Eventually(func(g Gomega) {
		var set v1alpha1.StackSet
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "preview"}, &set)).To(Succeed())
		g.Expect(set.Status.SkippedForks).To(Equal(int32(1)))
		g.Expect(set.Status.PullRequests).To(HaveLen(1), "only #%d has a Stack", pr.Number)
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	g.Expect(repo.Comments(forkPR.Number)).To(BeEmpty())

	// A review stack deploys its pull request, and is destroyed when it closes.
	reviewHead := repo.Push("feature/r", "main", map[string]string{"Pulumi.yaml": previewProgram("r1", false)})
	review := repo.OpenPullRequest("feature/r", "main", "Review: r", "")
	reviewStack := fmt.Sprintf("review-%d", review.Number)
	waitFeedback(review.Number, reviewStack, reviewHead, "success", "up of", "**succeeded**")
	cm := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: reviewStack}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("content", "r1"))

	// Closing: the Stacks go (the review stack's ConfigMap with it), and the comments say so.
	repo.ClosePullRequest(pr.Number)
	repo.ClosePullRequest(review.Number)
	g.Eventually(func(g Gomega) {
		var list pulumiv1.StackList
		g.Expect(c.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: reviewStack}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the review stack's ConfigMap outlived it (%v)", err)
	}).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
	for _, x := range []struct {
		number int64
		stack  string
	}{{pr.Number, "preview-1"}, {review.Number, reviewStack}} {
		g.Eventually(func(g Gomega) {
			body, _ := feedback(g, x.number, x.stack, head)
			g.Expect(body).To(ContainSubstring("the pull request is closed; its Stack is destroyed and deleted"))
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	}

	// The canary is in no comment and no status.
	for _, number := range []int64{pr.Number, review.Number, forkPR.Number} {
		for _, cm := range repo.Comments(number) {
			g.Expect(cm.Body).NotTo(ContainSubstring(previewCanary))
		}
	}
	for _, sha := range []string{head, broken, reviewHead} {
		for _, st := range repo.CommitStatuses(sha) {
			g.Expect(st.Description + st.TargetURL).NotTo(ContainSubstring(previewCanary))
		}
	}
}
