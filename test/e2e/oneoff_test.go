//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// testPKOOneOffOperations runs PKO v2's hand-made one-off operations (auto.pulumi.com
// Updates) on the release images and the chart's RBAC, the way a PKO runbook makes them:
// `kubectl apply -f -` of the request and `kubectl wait --for=condition=Complete`. A
// previewOnly refresh reports a hand edit of what the Stack deployed as drift and leaves
// it; `kubectl stackwright run up --refresh` puts it back; a type PKO's schema admits but
// nothing runs is refused; and the Stack's own record of its last update is the same
// throughout, as docs/api.md promises.
func testPKOOneOffOperations(t *testing.T, jc *jobCluster) {
	c := jc.c
	ctx := context.Background()
	const ns, stack, deployed = "e2e-oneoff", "cm", "put there by the Stack"
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, configMapWriterYAML))
	applyConfigMapStack(t, ns, s3CredentialsYAML, "", deployed)
	var lastUpdate *pulumiv1.StackUpdateState
	NewWithT(t).Eventually(func(g Gomega) {
		st := waitStackReadyOnce(g, c, ns, stack)
		g.Expect(st.Status.LastUpdate).NotTo(BeNil())
		lastUpdate = st.Status.LastUpdate.DeepCopy()
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "Stack not Ready\n%s", describeNamespace(ns))
	cmKey := client.ObjectKey{Namespace: ns, Name: "made-by-stack"}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, cmKey, &cm); err != nil {
		t.Fatalf("the Stack's ConfigMap: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"by": deployed}, cm.Data); diff != "" {
		t.Fatalf("the Stack's ConfigMap's data (-want +got):\n%s", diff)
	}

	// Someone edits what the Stack deployed, behind its back.
	const edited = "edited by hand"
	cm.Data["by"] = edited
	if err := c.Update(ctx, &cm); err != nil {
		t.Fatalf("failed to edit the ConfigMap by hand: %v", err)
	}

	// A runbook's drift check: a refresh that records nothing.
	drift := applyRequest(t, c, ns, "cm-drift", stack, "type: refresh\n  previewOnly: true\n")
	wantConditions(t, drift, "False/Complete", "True/Complete", "False/"+string(v1alpha1.UpdateResultSucceeded))
	t.Logf("the drift check: %s", drift.Status.Message)
	if !strings.HasPrefix(drift.Status.Message, "drift detected: ") {
		t.Errorf("the drift check's message is %q; want it to report the hand edit as drift", drift.Status.Message)
	}
	ranAs(t, c, ns, drift, v1alpha1.UpdateTypeDrift)
	// previewOnly: the hand edit is still there.
	if err := c.Get(ctx, cmKey, &cm); err != nil {
		t.Fatalf("the Stack's ConfigMap: %v", err)
	}
	if got := cm.Data["by"]; got != edited {
		t.Errorf("after the previewOnly refresh the ConfigMap says %q; want %q, the hand edit, left alone", got, edited)
	}

	// The plugin as built from this checkout, run as a user would. --refresh: an up
	// compares the program with the state, which does not know of the hand edit until
	// it is refreshed (the previewOnly refresh recorded nothing).
	plugin := filepath.Join(t.TempDir(), "kubectl-stackwright")
	build := exec.Command("go", "build", "-o", plugin, "./cmd/kubectl-stackwright")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("failed to build kubectl-stackwright: %v\n%s", err, out)
	}
	out, err := execErr("", plugin, "--kubeconfig", os.Getenv("KUBECONFIG"), "-n", ns, "run", "up", stack, "--yes", "--refresh", "--timeout", "5m")
	if err != nil {
		t.Fatalf("kubectl stackwright run up: %v\n%s\n%s", err, out, describeNamespace(ns))
	}
	t.Logf("kubectl stackwright run up:\n%s", out)
	requested := regexp.MustCompile(`(?m)^Requested up of Stack ` + ns + `/` + stack + `: update\.auto\.pulumi\.com/(\S+)$`).FindStringSubmatch(out)
	running := regexp.MustCompile(`(?m)^Running as Update (\S+) `).FindStringSubmatch(out)
	if requested == nil || running == nil {
		t.Fatalf("kubectl stackwright run up printed neither the request nor the Update that ran it:\n%s", out)
	}
	up := &autov1alpha1.Update{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: requested[1]}, up); err != nil {
		t.Fatalf("the request kubectl stackwright made: %v", err)
	}
	wantConditions(t, up, "False/Complete", "True/Complete", "False/"+string(v1alpha1.UpdateResultSucceeded))
	if up.Status.Update != running[1] {
		t.Errorf("the plugin printed Update %s; the request says it ran as %s", running[1], up.Status.Update)
	}
	ranAs(t, c, ns, up, v1alpha1.UpdateTypeUp)
	if err := c.Get(ctx, cmKey, &cm); err != nil {
		t.Fatalf("the Stack's ConfigMap: %v", err)
	}
	if got := cm.Data["by"]; got != deployed {
		t.Errorf("after the one-off up the ConfigMap says %q; want %q, the hand edit put back", got, deployed)
	}

	// A type PKO's schema admits but that is no operation: refused at once, and nothing ran.
	rollback := applyRequest(t, c, ns, "cm-rollback", stack, "type: rollback\n")
	wantConditions(t, rollback, "False/Refused", "True/Refused", "True/UnsupportedType")
	var ran v1alpha1.UpdateList
	if err := c.List(ctx, &ran, client.InNamespace(ns), client.MatchingLabels{v1alpha1.RequestLabel: rollback.Name}); err != nil {
		t.Fatalf("the Updates of the Stack: %v", err)
	}
	if rollback.Status.Update != "" || len(ran.Items) != 0 {
		t.Errorf("the refused request ran: status.update %q, %d Updates labelled with it", rollback.Status.Update, len(ran.Items))
	}

	// The one-offs left the Stack's own record alone: its last update is still the first
	// up, and it is still Ready.
	var st pulumiv1.Stack
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: stack}, &st); err != nil {
		t.Fatalf("Stack %s: %v", stack, err)
	}
	if diff := cmp.Diff(lastUpdate, st.Status.LastUpdate); diff != "" {
		t.Errorf("the one-offs changed the Stack's status.lastUpdate (-before +after):\n%s", diff)
	}
	if !apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionReady) {
		t.Errorf("the Stack is no longer Ready after the one-offs: %+v", st.Status.Conditions)
	}

	run(t, "kubectl", "delete", "-n", ns, "stack/"+stack, "--timeout=5m")
	if err := c.Get(ctx, cmKey, &cm); !apierrors.IsNotFound(err) {
		t.Errorf("destroyOnFinalize left the ConfigMap behind: %v", err)
	}
}

// applyRequest applies, with kubectl from stdin as a runbook would, the auto.pulumi.com
// Update name on Stack stack of ns whose spec is spec (after workspaceName, indented as
// its fields), waits with kubectl for it to be Complete and returns it.
func applyRequest(t *testing.T, c client.Client, ns, name, stack, spec string) *autov1alpha1.Update {
	t.Helper()
	runStdin(t, `apiVersion: auto.pulumi.com/v1alpha1
kind: Update
metadata:
  name: `+name+`
  namespace: `+ns+`
spec:
  workspaceName: `+stack+`
  `+spec, "kubectl", "apply", "-f", "-")
	if out, err := runErr("kubectl", "wait", "-n", ns, "--for=condition=Complete", "update.auto.pulumi.com/"+name, "--timeout=5m"); err != nil {
		t.Fatalf("kubectl wait for update.auto.pulumi.com/%s: %v\n%s\n%s", name, err, out, describeNamespace(ns))
	}
	req := &autov1alpha1.Update{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, req); err != nil {
		t.Fatalf("update.auto.pulumi.com/%s: %v", name, err)
	}
	return req
}

// wantConditions compares a request's Progressing, Complete and Failed conditions, each
// as status/reason, with what PKO's clients expect of it.
func wantConditions(t *testing.T, req *autov1alpha1.Update, progressing, complete, failed string) {
	t.Helper()
	got := map[string]string{}
	for _, c := range req.Status.Conditions {
		got[c.Type] = string(c.Status) + "/" + c.Reason
	}
	want := map[string]string{
		autov1alpha1.ConditionProgressing: progressing,
		autov1alpha1.ConditionComplete:    complete,
		autov1alpha1.ConditionFailed:      failed,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions of update.auto.pulumi.com/%s, status/reason (-want +got):\n%s\nmessage: %s", req.Name, diff, req.Status.Message)
	}
}

// ranAs checks that the request names, in status.update, the Stack's Update that ran
// it: one of type typ, succeeded, labelled with the request's name.
func ranAs(t *testing.T, c client.Client, ns string, req *autov1alpha1.Update, typ v1alpha1.UpdateType) {
	t.Helper()
	if req.Status.Update == "" {
		t.Errorf("update.auto.pulumi.com/%s names no Update in status.update", req.Name)
		return
	}
	var u v1alpha1.Update
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: req.Status.Update}, &u); err != nil {
		t.Errorf("the Update that ran update.auto.pulumi.com/%s: %v", req.Name, err)
		return
	}
	type ran struct {
		Request string
		Type    v1alpha1.UpdateType
		Phase   v1alpha1.UpdatePhase
	}
	want := ran{Request: req.Name, Type: typ, Phase: v1alpha1.UpdatePhaseSucceeded}
	got := ran{Request: u.Labels[v1alpha1.RequestLabel], Type: u.Spec.Type, Phase: u.Status.Phase}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Update %s, which ran update.auto.pulumi.com/%s (-want +got):\n%s", u.Name, req.Name, diff)
	}
}
