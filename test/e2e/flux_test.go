//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/cluster"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

// deleteStacksFirst deletes the namespace's Stacks, when the test ends, before its
// namespace: each destroy then runs in a runner Pod as its Stack's ServiceAccount, and a
// test that failed half-way leaves no Stack holding its namespace.
func deleteStacksFirst(t *testing.T, ns string) {
	t.Cleanup(func() {
		_, _ = runErr("kubectl", "delete", "stacks.pulumi.com", "--all", "-n", ns, "--timeout=5m")
	})
}

// docsManifest is the block of docs/flux.md marked `<!-- e2e: name -->`, as written there,
// with each old string of replace (pairs of old, new) replaced: only addresses, which
// differ between a reader's cluster and this one.
func docsManifest(t *testing.T, name string, replace ...string) string {
	t.Helper()
	return docsBlock(t, "flux.md", name, replace...)
}

// docsBlock is docsManifest for the block of docs/<file>.
func docsBlock(t *testing.T, file, name string, replace ...string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "docs", file))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "<!-- e2e: "+name+" -->\n")
	if !ok {
		t.Fatalf("docs/%s has no block %q", file, name)
	}
	lines := strings.Split(after, "\n")
	indent := lines[0][:len(lines[0])-len(strings.TrimLeft(lines[0], " "))]
	var block []string
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "```" {
			break
		}
		block = append(block, strings.TrimPrefix(l, indent))
	}
	out := strings.Join(block, "\n") + "\n"
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(out, replace[i]) {
			t.Fatalf("block %q of docs/%s has no %q to replace", name, file, replace[i])
		}
		out = strings.ReplaceAll(out, replace[i], replace[i+1])
	}
	return out
}

// stateCredentialsYAML is the Secret the docs' Stacks read their backend keys and
// passphrase from.
const stateCredentialsYAML = `apiVersion: v1
kind: Secret
metadata:
  name: state-credentials
stringData:
  accessKey: ` + s3Access + `
  secretKey: ` + s3Secret + `
  passphrase: e2e-only
`

// namedConfigMapProgram is a Pulumi.yaml of project project writing value into ConfigMap cm.
func namedConfigMapProgram(project, cm, value string) string {
	return `name: ` + project + `
runtime: yaml
resources:
  made:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: ` + cm + `
      data:
        value: ` + value + `
`
}

// fluxObject reads a Flux object of kind (a source, or a Receiver) in ns.
func fluxObject(g Gomega, c client.Client, ns, kind, name string) *unstructured.Unstructured {
	group := "source.toolkit.fluxcd.io"
	version := "v1"
	if kind == "Receiver" {
		group = "notification.toolkit.fluxcd.io"
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)).To(Succeed())
	return obj
}

// readyCondition is a Flux object's Ready condition's status, reason and message.
func readyCondition(obj *unstructured.Unstructured) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
		}
	}
	return status, reason, message
}

// githubPush posts a GitHub push event for repoURL's main branch to url, signed with token
// as GitHub signs it, and returns the response's status and body.
func githubPush(t *testing.T, url, repoURL, token string) (int, string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"ref":        "refs/heads/main",
		"before":     strings.Repeat("0", 40),
		"repository": map[string]any{"clone_url": repoURL, "html_url": strings.TrimSuffix(repoURL, ".git"), "name": "infra"},
	})
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("e2e-%d", time.Now().UnixNano()))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := clusterHTTP.Do(req)
	if err != nil {
		t.Fatalf("failed to post the push event to %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// timeToRunner waits for a runner Pod of the Stack's Update after those named in before,
// polling often, and returns how long after start it was first seen.
func timeToRunner(t *testing.T, c client.Client, ns, stack string, before []string, start time.Time) time.Duration {
	t.Helper()
	var seen time.Duration
	NewWithT(t).Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(c.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "stackwright-runner"})).To(Succeed())
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, stack+"-") && !containsPrefix(before, p.Name) {
				seen = time.Since(start)
				return
			}
		}
		g.Expect(false).To(BeTrue(), "no new runner Pod yet")
	}).WithTimeout(3*time.Minute).WithPolling(100*time.Millisecond).Should(Succeed(), "\n%s", describeNamespace(ns))
	return seen
}

func containsPrefix(names []string, pod string) bool {
	for _, n := range names {
		if strings.HasPrefix(pod, n) {
			return true
		}
	}
	return false
}

// ups counts the Stack's Updates of type up.
func ups(g Gomega, c client.Client, ns, stack string) int {
	var list v1alpha1.UpdateList
	g.Expect(c.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.StackLabel: stack})).To(Succeed())
	n := 0
	for _, u := range list.Items {
		if u.Spec.Type == v1alpha1.UpdateTypeUp {
			n++
		}
	}
	return n
}

// deployedValue waits for the Stack to be Ready at a revision containing commit, with its
// program's ConfigMap holding value.
func deployedValue(t *testing.T, c client.Client, ns, stack, cm, commit, value string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		st := waitStackReadyOnce(g, c, ns, stack)
		g.Expect(st.Status.LastUpdate).NotTo(BeNil())
		g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(ContainSubstring(commit))
		var got corev1.ConfigMap
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cm}, &got)).To(Succeed())
		g.Expect(got.Data).To(HaveKeyWithValue("value", value))
	}).WithTimeout(5*time.Minute).WithPolling(time.Second).Should(Succeed(), "%s not deployed\n%s", commit, describeNamespace(ns))
}

// testFluxSources runs Stacks on the real source-controller's artifacts: a GitRepository
// of the git server on the node and a Bucket of the in-cluster S3 server reach Ready; a push
// announced through a Flux Receiver produces a new artifact and exactly one new up, with
// no polling interval in between; a GitRepository that cannot fetch holds its Stack with
// the source's own reason; PKO's flux-source example runs.
func testFluxSources(t *testing.T, jc *jobCluster) {
	g, c := NewWithT(t), jc.c
	const ns = "e2e-flux"
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	deleteStacksFirst(t, ns)
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, configMapWriterYAML+"---\n"+stateCredentialsYAML))

	repos := t.TempDir()
	repo, first := gitserver.NewRepo(t, repos, "infra", map[string]string{"network/Pulumi.yaml": namedConfigMapProgram("network", "network", "first")})
	srv := gitserver.NewHTTPServerOn(t, listenOnNode(t), repos, nil)
	repoURL := srv.URL + "/infra.git"
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, docsManifest(t, "gitrepository", "https://git.example.com/platform/infra.git", repoURL)))
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, docsManifest(t, "stack-on-gitrepository")))
	deployedValue(t, c, ns, "network", "network", first, "first")

	// A push, announced by the git host's webhook to Flux's Receiver.
	const receiverToken = "e2e-receiver-token"
	run(t, "kubectl", "create", "secret", "generic", "-n", ns, "receiver-token", "--from-literal=token="+receiverToken)
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, docsManifest(t, "receiver")))
	var hookPath string
	g.Eventually(func(g Gomega) {
		r := fluxObject(g, c, ns, "Receiver", "infra-push")
		status, reason, msg := readyCondition(r)
		g.Expect(status).To(Equal("True"), "Receiver: %s: %s", reason, msg)
		hookPath, _, _ = unstructured.NestedString(r.Object, "status", "webhookPath")
		g.Expect(hookPath).NotTo(BeEmpty())
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "Receiver not ready\n%s", describeNamespace(ns))
	before := updates(g, c, ns)
	second := repo.Commit(map[string]string{"network/Pulumi.yaml": namedConfigMapProgram("network", "network", "second")})
	pushed := time.Now()
	code, body := githubPush(t, "http://"+jc.flux.receiverIP+hookPath, repoURL, receiverToken)
	g.Expect(code).To(Equal(http.StatusOK), "the Receiver refused the push: %s", body)
	took := timeToRunner(t, c, ns, "network", before, pushed)
	t.Logf("push to runner Pod (Flux Receiver, GitRepository, Stack watch): %.2f s", took.Seconds())
	deployedValue(t, c, ns, "network", "network", second, "second")
	g.Expect(ups(g, c, ns, "network")).To(Equal(2), "one up per artifact")
	var st pulumiv1.Stack
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "network"}, &st)).To(Succeed())
	g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal("main@sha1:"+second), "the artifact's revision")

	// A source that cannot fetch: the Stack waits, naming the source's own reason.
	unreachable := fmt.Sprintf("http://%s/missing.git", net.JoinHostPort(cluster.NodeIP, "1"))
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t,
		strings.ReplaceAll(docsManifest(t, "gitrepository", "https://git.example.com/platform/infra.git", unreachable), "name: infra", "name: broken")+"---\n"+
			strings.ReplaceAll(strings.ReplaceAll(docsManifest(t, "stack-on-gitrepository"), "name: infra", "name: broken"), "name: network", "name: waits")))
	g.Eventually(func(g Gomega) {
		_, reason, _ := readyCondition(fluxObject(g, c, ns, "GitRepository", "broken"))
		g.Expect(reason).NotTo(BeEmpty())
		var st pulumiv1.Stack
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waits"}, &st)).To(Succeed())
		rec := meta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionReconciling)
		g.Expect(rec).NotTo(BeNil())
		g.Expect(rec.Reason).To(Equal(pulumiv1.ReasonSourceUnavailable))
		g.Expect(rec.Message).To(ContainSubstring(`GitRepository "broken" is not ready (` + reason + `)`))
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
	g.Expect(ups(g, c, ns, "waits")).To(BeZero())

	// A Bucket of an S3 server that keeps objects' ETags, which source-controller needs
	// (the shared one keeps no metadata).
	programs := runS3(t, c, ns, "programs-s3", false)
	programs.putObject(t, "programs", "edge/Pulumi.yaml", namedConfigMapProgram("edge", "edge", "from-bucket"))
	run(t, "kubectl", "create", "secret", "generic", "-n", ns, "bucket-credentials", "--from-literal=accesskey="+s3Access, "--from-literal=secretkey="+s3Secret)
	// Plain HTTP is this S3 server's only protocol; the docs' endpoint speaks HTTPS.
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, docsManifest(t, "bucket",
		"endpoint: s3.example.com", "endpoint: "+strings.TrimPrefix(programs.endpoint, "http://")+"\n  insecure: true")))
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, docsManifest(t, "stack-on-bucket")))
	deployedValue(t, c, ns, "edge", "edge", "sha256:", "from-bucket")

	testPKOFluxExample(t, jc, ns, srv, repos)

	for _, s := range []string{"network", "edge", "waits", "flux-gitrepository"} {
		run(t, "kubectl", "delete", "-n", ns, "stack/"+s, "--timeout=5m")
	}
}

// testGitWebhook: a projectRepo Stack polling once an hour deploys a push at once when the
// git host calls the manager's webhook with the namespace's secret; a wrong secret is
// refused.
func testGitWebhook(t *testing.T, jc *jobCluster) {
	g, c := NewWithT(t), jc.c
	const ns = "e2e-git-webhook"
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	deleteStacksFirst(t, ns)
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, configMapWriterYAML+"---\n"+s3CredentialsYAML+"---\n"+docsManifest(t, "git-webhook-secret")))
	const token = "a-long-random-string" // the docs' example secret, applied as written

	repos := t.TempDir()
	repo, first := gitserver.NewRepo(t, repos, "hooked", map[string]string{"app/Pulumi.yaml": namedConfigMapProgram("hooked", "hooked", "first")})
	srv := gitserver.NewHTTPServerOn(t, listenOnNode(t), repos, nil)
	repoURL := srv.URL + "/hooked.git"
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, `apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: hooked
spec:
  stack: e2e
  projectRepo: `+repoURL+`
  branch: main
  repoDir: app
  resyncFrequencySeconds: 3600
  serviceAccountName: deployer
  destroyOnFinalize: true
  envRefs:
`+s3EnvRefsYAML))
	deployedValue(t, c, ns, "hooked", "hooked", first, "first")

	hook := "http://" + jc.gitWebhookIP + "/hooks/git/" + ns
	code, body := githubPush(t, hook, repoURL, "not-the-secret")
	g.Expect(code).To(Equal(http.StatusUnauthorized), "%s", body)

	// A flood from anyone who can reach the endpoint: large unsigned bodies at this
	// namespace, and signed-looking ones at another. The manager reads none of them whole,
	// does not restart, and this namespace's signed push below still gets through.
	restartsBefore := managerRestarts(g, c)
	floodWebhook(t, "http://"+jc.gitWebhookIP+"/hooks/git/", ns, 200, 10<<20)
	g.Expect(managerRestarts(g, c)).To(Equal(restartsBefore), "the manager restarted under the flood\n%s", describeManager())

	before := updates(g, c, ns)
	second := repo.Commit(map[string]string{"app/Pulumi.yaml": namedConfigMapProgram("hooked", "hooked", "second")})
	pushed := time.Now()
	code, body = githubPush(t, hook, repoURL, token)
	g.Expect(code).To(Equal(http.StatusAccepted), "%s", body)
	g.Expect(body).To(ContainSubstring(`"stacks":1`))
	took := timeToRunner(t, c, ns, "hooked", before, pushed)
	t.Logf("push to runner Pod (manager git webhook, Stack polling hourly): %.2f s", took.Seconds())
	deployedValue(t, c, ns, "hooked", "hooked", second, "second")
	g.Expect(ups(g, c, ns, "hooked")).To(Equal(2))
	run(t, "kubectl", "delete", "-n", ns, "stack/hooked", "--timeout=5m")
}

// zeros is an endless reader of zero bytes: flood bodies cost the test no memory.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// floodWebhook posts n requests at once to the git webhook: bodies of size bytes without
// any proof at namespace ns, and small signed-looking ones at another namespace. The
// answers do not matter (the server may close a connection it read nothing of): what
// matters is what the manager holds meanwhile.
func floodWebhook(t *testing.T, base, ns string, n int, size int64) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			url, body, length := base+ns, io.LimitReader(zeros{}, size), size
			signed := i%4 == 0
			if signed {
				url, body, length = base+"e2e-flood-target", strings.NewReader("{}"), 2
			}
			req, err := http.NewRequest(http.MethodPost, url, body)
			if err != nil {
				return
			}
			req.ContentLength = length
			req.Header.Set("X-GitHub-Event", "push")
			if signed {
				req.Header.Set("X-Hub-Signature-256", "sha256=00")
			}
			resp, err := clusterHTTP.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	}
	wg.Wait()
}
