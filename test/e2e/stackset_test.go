//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

// reviewProgram writes a ConfigMap named after the stack with the runner Pod's
// credentials, so what each review stack deployed (and destroyed) shows through the API.
func reviewProgram(content string) string {
	return `name: review
runtime: yaml
resources:
  made:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: review-${pulumi.stack}
      data:
        content: ` + content + `
`
}

// testStackSetReviewBranches: a StackSet makes a review stack, run by runner Pods, for each
// feature/* branch of a repository served on the node; each lives 2 minutes after its last
// update (a TTL, counted from the update so that a queue of runs does not eat it) and is
// then destroyed and deleted, and is not made again until its branch gets a new commit.
func testStackSetReviewBranches(t *testing.T, jc *jobCluster) {
	g, c := NewWithT(t), jc.c
	ctx := context.Background()
	repos := t.TempDir()
	repo, _ := gitserver.NewRepo(t, repos, "app", map[string]string{"Pulumi.yaml": reviewProgram("main")})
	srv := gitserver.NewHTTPServerOn(t, listenOnNode(t), repos, nil)
	for _, b := range []string{"feature/a", "feature/b", "fix/x"} {
		repo.Branch(b)
	}
	const ns = "e2e-stackset"
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, configMapWriterYAML))
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, s3CredentialsYAML+`---
apiVersion: stackwright.dev/v1alpha1
kind: StackSet
metadata:
  name: review
spec:
  generator:
    gitBranches:
      url: `+srv.URL+`/app.git
      include: ["feature/*"]
      interval: 10s
  deletionPolicy: Destroy
  template:
    spec:
      stack: "{{branchSlug}}"
      projectRepo: `+srv.URL+`/app.git
      branch: "{{branch}}"
      resyncFrequencySeconds: 10
      serviceAccountName: deployer
      stackwright:
        ttl:
          after: 2m
          from: LastUpdate
      envRefs:
`+indent(s3EnvRefsYAML, "    ")))

	made := func(g Gomega, stack string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "review-" + stack}, cm)).To(Succeed())
		return cm
	}
	g.Eventually(func(g Gomega) {
		var list pulumiv1.StackList
		g.Expect(c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.StackSetLabel: "review"})).To(Succeed())
		var branches []string
		for _, st := range list.Items {
			branches = append(branches, st.Spec.Branch)
		}
		g.Expect(branches).To(ConsistOf("feature/a", "feature/b"))
		g.Expect(made(g, "feature-a").Data).To(HaveKeyWithValue("content", "main"))
		g.Expect(made(g, "feature-b").Data).To(HaveKeyWithValue("content", "main"))
	}).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "a review stack per feature branch\n%s", describeNamespace(ns))
	g.Expect(run(t, "kubectl", "get", "stacksets", "-n", ns)).To(ContainSubstring("review"))

	// The TTL runs out: each Stack is destroyed and deleted, and not made again.
	g.Eventually(func(g Gomega) {
		var list pulumiv1.StackList
		g.Expect(c.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "review-feature-a"}, &corev1.ConfigMap{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the expired stack's ConfigMap was not destroyed")
		set := &v1alpha1.StackSet{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "review"}, set)).To(Succeed())
		g.Expect(set.Status.Expired).To(HaveLen(2))
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "the review stacks expire\n%s", describeNamespace(ns))

	// A push to feature/a revives its review stack.
	repo.Commit(map[string]string{"Pulumi.yaml": reviewProgram("second")})
	repo.Branch("feature/a")
	g.Eventually(func(g Gomega) {
		g.Expect(made(g, "feature-a").Data).To(HaveKeyWithValue("content", "second"))
	}).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "a new commit revives the review stack\n%s", describeNamespace(ns))
	var list pulumiv1.StackList
	g.Expect(c.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1), "only feature/a's stack is back")
	g.Expect(list.Items[0].Spec.Branch).To(Equal("feature/a"))

	// Deleted before its namespace, so that the destroy runs as the Stack's
	// ServiceAccount (a terminating namespace's runs hold no token).
	run(t, "kubectl", "delete", "-n", ns, "stackset/review", "--timeout=5m")
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "review-feature-a"}, &corev1.ConfigMap{})
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
	g.Expect(err).To(HaveOccurred(), "deleting the Destroy set left the revived stack's ConfigMap")
}
