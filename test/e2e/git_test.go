//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/testing/cluster"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

// listenOnNode opens a TCP listener on the node's address inside the cluster's network
// namespace, where the manager's Pod can reach it and nothing outside the machine can.
func listenOnNode(t *testing.T) net.Listener {
	t.Helper()
	var l net.Listener
	err := inClusterNetwork(func() (err error) {
		l, err = net.Listen("tcp", net.JoinHostPort(cluster.NodeIP, "0"))
		return err
	})
	if err != nil {
		t.Fatalf("failed to listen on the node: %v", err)
	}
	return l
}

// clusterHTTP is an HTTP client whose connections are made inside the cluster's network
// namespace, so the tests reach Services by their cluster IPs as Pods do.
var clusterHTTP = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
	DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := inClusterNetwork(func() (err error) {
			conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	},
}}

// inClusterNetwork runs fn on a thread inside the cluster's network namespace: sockets it
// opens stay there.
func inClusterNetwork(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		// The thread switches network namespace and is never unlocked, so the runtime
		// discards it when this goroutine ends; the sockets keep their namespace.
		runtime.LockOSThread()
		f, err := os.Open("/var/run/netns/" + cluster.NetNS)
		if err != nil {
			done <- err
			return
		}
		defer func() { _ = f.Close() }()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("failed to enter network namespace %s: %w", cluster.NetNS, err)
			return
		}
		done <- fn()
	}()
	return <-done
}

// configMapProgram is a Pulumi.yaml that writes value into a ConfigMap through the
// Kubernetes provider, with the runner Pod's in-cluster credentials, so what each commit
// deployed is visible through the API.
func configMapProgram(value string) string {
	return `name: from-git
runtime: yaml
resources:
  made:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: made-from-git
      data:
        commit: ` + value + `
`
}

// waitCommitDeployed waits for Stack name of ns to be Ready at commit, a commit of
// configMapProgram(value), and for the ConfigMap it made to say value.
func waitCommitDeployed(t *testing.T, c client.Client, ns, name, commit, value string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		st := waitStackReadyOnce(g, c, ns, name)
		g.Expect(st.Status.LastUpdate).NotTo(BeNil())
		g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal(commit))
		var cm corev1.ConfigMap
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "made-from-git"}, &cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("commit", value))
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "commit %s not deployed\n%s", commit, describeNamespace(ns))
}

// testGitStackFollowsBranch runs a git Stack through runner Jobs: the
// manager fetches the branch from a git server on the node, each commit is deployed by a
// short-lived runner Pod, and a new commit is picked up by polling.
func testGitStackFollowsBranch(t *testing.T, jc *jobCluster) {
	g, c := NewWithT(t), jc.c

	repos := t.TempDir()
	repo, first := gitserver.NewRepo(t, repos, "infra", map[string]string{"app/Pulumi.yaml": configMapProgram("first")})
	srv := gitserver.NewHTTPServerOn(t, listenOnNode(t), repos, nil)

	const ns = "e2e-git"
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, configMapWriterYAML))
	manifest := s3CredentialsYAML + `---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: infra
spec:
  stack: e2e
  projectRepo: ` + srv.URL + `/infra.git
  branch: main
  repoDir: app
  resyncFrequencySeconds: 10
  serviceAccountName: deployer
  destroyOnFinalize: true
  envRefs:
` + s3EnvRefsYAML
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, manifest))

	waitCommitDeployed(t, c, ns, "infra", first, "first")

	// A hostile tenant's Stack follows a git:// server that never stops advertising refs:
	// the manager cuts the listing off at its cap and neither restarts nor stops serving
	// this tenant, whose next commit is deployed within a minute meanwhile.
	const hostile = "e2e-git-hostile"
	createNamespace(t, c, hostile)
	t.Cleanup(func() { deleteNamespace(t, c, hostile) })
	endless := startEndlessGitDaemon(t)
	restartsBefore := managerRestarts(g, c)
	run(t, "kubectl", "apply", "-n", hostile, "-f", writeManifest(t, `apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: endless
spec:
  stack: e2e
  projectRepo: git://`+endless+`/endless.git
  branch: main
  resyncFrequencySeconds: 10
`))
	NewWithT(t).Eventually(func(g Gomega) {
		var st pulumiv1.Stack
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: hostile, Name: "endless"}, &st)).To(Succeed())
		cond := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Message).To(ContainSubstring("the ref listing exceeded"))
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "\n%s", describeNamespace(hostile))
	second := repo.Commit(map[string]string{"app/Pulumi.yaml": configMapProgram("second")})
	committed := time.Now()
	waitCommitDeployed(t, c, ns, "infra", second, "second")
	took := time.Since(committed)
	t.Logf("a commit beside a hostile endless git:// server: deployed %.1f s after it was made", took.Seconds())
	g.Expect(took).To(BeNumerically("<", 60*time.Second), "another tenant's commit waited behind the hostile listing")
	g.Expect(managerRestarts(g, c)).To(Equal(restartsBefore), "the manager restarted\n%s", describeManager())

	// One runner Job per Update, and no Pod left running once the Stack is at rest.
	g.Expect(updates(g, c, ns)).To(HaveLen(2))
	NewWithT(t).Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(c.List(context.Background(), &pods, client.InNamespace(ns))).To(Succeed())
		for _, p := range pods.Items {
			g.Expect(p.Status.Phase).To(BeElementOf(corev1.PodSucceeded, corev1.PodFailed), "Pod %s still %s", p.Name, p.Status.Phase)
		}
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	listings, fetches := srv.Counts()[0], srv.Counts()[1]
	g.Expect(fetches).To(BeNumerically(">=", 2), "the manager fetched each commit (listings %d)", listings)

	run(t, "kubectl", "delete", "-n", ns, "stack/infra", "--timeout=5m")
	var cm corev1.ConfigMap
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "made-from-git"}, &cm)
	g.Expect(err).To(HaveOccurred(), "destroyOnFinalize left the ConfigMap behind")
}

// startEndlessGitDaemon serves git:// on the node: whatever it is asked, it advertises refs
// forever, as a hostile server would. It returns host:port.
func startEndlessGitDaemon(t *testing.T) string {
	t.Helper()
	l := listenOnNode(t)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = conn.Close() }()
				buf := make([]byte, 4096)
				if _, err := conn.Read(buf); err != nil {
					return
				}
				const sha = "0123456789abcdef0123456789abcdef01234567"
				line := func(s string) error {
					_, err := fmt.Fprintf(conn, "%04x%s", len(s)+4, s)
					return err
				}
				if line(sha+" HEAD\x00multi_ack side-band-64k ofs-delta\n") != nil {
					return
				}
				for i := 0; ; i++ {
					if line(fmt.Sprintf("%s refs/heads/branch-%09d\n", sha, i)) != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().String()
}
