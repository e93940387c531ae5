//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// notification is what Flux's generic Provider posts: the event as Flux's controllers
// send it.
type notification struct {
	InvolvedObject corev1.ObjectReference `json:"involvedObject"`
	Severity       string                 `json:"severity"`
	Reason         string                 `json:"reason"`
	Message        string                 `json:"message"`
	Metadata       map[string]string      `json:"metadata"`
}

// notificationSink is the endpoint a generic Provider delivers to: an HTTP server on the
// node that keeps every body it receives.
type notificationSink struct {
	URL    string
	mu     sync.Mutex
	bodies []string
}

func startNotificationSink(t *testing.T) *notificationSink {
	t.Helper()
	l := listenOnNode(t)
	s := &notificationSink{URL: "http://" + l.Addr().String() + "/"}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, string(b))
		s.mu.Unlock()
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// received decodes what arrived about Stacks in ns.
func (s *notificationSink) received(g Gomega, ns string) []notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []notification
	for _, b := range s.bodies {
		var n notification
		g.Expect(json.Unmarshal([]byte(b), &n)).To(Succeed(), "not a Flux event: %s", b)
		if n.InvolvedObject.Namespace == ns {
			out = append(out, n)
		}
	}
	return out
}

// count is how many notifications say reason about stack, per Update.
func count(ns []notification, stack, reason string) map[string]int {
	per := map[string]int{}
	for _, n := range ns {
		if n.InvolvedObject.Name == stack && n.Reason == reason {
			per[n.Metadata["update"]]++
		}
	}
	return per
}

const notifyCanary = "e2e-N0tify-canary-value"

// notifyStackYAML is a Stack of ns with a secret configuration value (the canary) and the
// given program and extra spec.
func notifyStackYAML(name, program, spec string) string {
	return `apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: ` + name + `
program:
` + indent(program, "  ") + `---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: ` + name + `
spec:
  stack: e2e
  programRef:
    name: ` + name + `
  serviceAccountName: deployer
  destroyOnFinalize: true
  secretsRef:
    canary:
      type: Secret
      secret: {name: canary, key: value}
` + spec + `  envRefs:
` + s3EnvRefsYAML
}

// testFluxNotifications sends Stackwright's events through the real notification-controller:
// an Alert on Stacks (after the CRD patch docs/flux.md gives) and a generic Provider
// deliver exactly one notification per incident for a failed update, a stall, a preview
// awaiting approval (with the command that approves it) and drift, and the secret
// configuration of those Stacks appears in none.
func testFluxNotifications(t *testing.T, jc *jobCluster) {
	g, c := NewWithT(t), jc.c
	const ns = "e2e-flux-notify"
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	deleteStacksFirst(t, ns)
	sink := startNotificationSink(t)
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, configMapWriterYAML+"---\n"+s3CredentialsYAML))
	run(t, "kubectl", "create", "secret", "generic", "-n", ns, "canary", "--from-literal=value="+notifyCanary)

	runShell(t, docsManifest(t, "alert-crd-patch"))
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, docsManifest(t, "provider", "https://hooks.example.com/stackwright", sink.URL)))
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, docsManifest(t, "alert")))
	// Tenant B's Alert on tenant A's Stacks, to a sink of its own: notification-controller
	// runs with --no-cross-namespace-refs=true, as docs/flux.md requires.
	const nsB = "e2e-flux-notify-b"
	createNamespace(t, c, nsB)
	t.Cleanup(func() { deleteNamespace(t, c, nsB) })
	sinkB := startNotificationSink(t)
	run(t, "kubectl", "apply", "-n", nsB, "-f", writeManifest(t, docsManifest(t, "provider", "https://hooks.example.com/stackwright", sinkB.URL)))
	run(t, "kubectl", "apply", "-n", nsB, "-f", writeManifest(t, strings.Replace(docsManifest(t, "alert"), `name: "*"`, `name: "*"`+"\n    namespace: "+ns, 1)))

	const cmProgram = `resources:
  made:
    type: stackwright-testing:index:ConfigMap
    properties:
      name: NAME
      data:
        secret: ${canary}
`
	broken := `resources:
  made:
    type: stackwright-testing:index:ConfigMap
    properties:
      name: broken
      data:
        value: ${nowhere.value}
`
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t,
		notifyStackYAML("failing", broken, "")+"---\n"+
			notifyStackYAML("gated", strings.ReplaceAll(cmProgram, "NAME", "gated"), "  stackwright:\n    approval: Manual\n")+"---\n"+
			notifyStackYAML("drifting", strings.ReplaceAll(cmProgram, "NAME", "drifting"), "  driftDetection:\n    schedules:\n    - cron: \"* * * * *\"\n")))

	// Drift: the program's ConfigMap changed behind the Stack's back.
	waitStackReady(g, c, ns, "drifting")
	run(t, "kubectl", "label", "-n", ns, "configmap", "drifting", "changed=by-hand")
	run(t, "kubectl", "patch", "-n", ns, "configmap", "drifting", "--type=merge", "-p", `{"data":{"secret":"changed by hand"}}`)

	g.Eventually(func(g Gomega) {
		got := sink.received(g, ns)
		g.Expect(count(got, "failing", "UpdateFailed")).NotTo(BeEmpty(), "no UpdateFailed notification")
		g.Expect(count(got, "failing", "Stalled")).NotTo(BeEmpty(), "no Stalled notification")
		g.Expect(count(got, "gated", "AwaitingApproval")).NotTo(BeEmpty(), "no AwaitingApproval notification")
		g.Expect(count(got, "drifting", "DriftDetected")).NotTo(BeEmpty(), "no DriftDetected notification")
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s\n%s", describeNamespace(ns), describeFlux())

	// Late duplicates would arrive within seconds: notification-controller forwards at once.
	time.Sleep(10 * time.Second)
	got := sink.received(g, ns)
	for _, want := range []struct{ stack, reason string }{
		{"failing", "UpdateFailed"}, {"failing", "Stalled"}, {"gated", "AwaitingApproval"}, {"drifting", "DriftDetected"},
	} {
		for update, n := range count(got, want.stack, want.reason) {
			g.Expect(n).To(Equal(1), "%s about %s (Update %q) delivered %d times", want.reason, want.stack, update, n)
		}
	}
	g.Expect(count(got, "failing", "Stalled")).To(HaveLen(1), "one stall, one notification")
	for _, n := range got {
		g.Expect(n.InvolvedObject.APIVersion).To(Equal("pulumi.com/v1"))
		g.Expect(n.InvolvedObject.Kind).To(Equal("Stack"))
		switch n.Reason {
		case "UpdateFailed", "Stalled", "DriftDetected":
			g.Expect(n.Severity).To(Equal("error"), "%s", n.Reason)
		case "AwaitingApproval":
			g.Expect(n.Severity).To(Equal("info"))
			g.Expect(n.Message).To(ContainSubstring("approve with: kubectl annotate stack gated -n " + ns))
		}
	}
	sink.mu.Lock()
	all := strings.Join(sink.bodies, "\n")
	sink.mu.Unlock()
	g.Expect(all).NotTo(ContainSubstring(notifyCanary), "a secret reached a notification")
	sinkB.mu.Lock()
	leaked := len(sinkB.bodies)
	sinkB.mu.Unlock()
	g.Expect(leaked).To(BeZero(), "tenant B's Alert received %d of tenant A's events", leaked)

	var cm corev1.ConfigMap
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "gated"}, &cm)).NotTo(Succeed(), "a change awaiting approval was applied")
	for _, s := range []string{"failing", "gated", "drifting"} {
		run(t, "kubectl", "delete", "-n", ns, "stack/"+s, "--timeout=5m")
	}
}

// runShell runs a shell command as a reader would, with ./bin first on the PATH.
func runShell(t *testing.T, script string) {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

// describeFlux is what a failed notification test needs: the controllers' recent logs.
func describeFlux() string {
	out, _ := runErr("kubectl", "-n", fluxNamespace, "logs", "deploy/notification-controller", "--tail=60")
	return "--- notification-controller ---\n" + out
}
