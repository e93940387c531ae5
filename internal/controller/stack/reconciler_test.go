package stack_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/testing/pulumicloud"
)

// The whole life of a Program Stack against the real engine: first up, outputs with
// secrets masked, a Program change rolled out, and destroy on delete, each checked on disk.
func TestStackReconciler_Reconcile_ProgramStackLifecycle(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	prog := s.program("files", map[string]pulumiv1.Resource{
		"greeting": fileResource("greeting.txt", "hello"),
		"token":    randomResource(24),
	}, map[string]string{"digest": "${greeting.sha256}", "token": "${token.result}"})
	s.create(prog)
	s.create(s.stack("files", "files"))

	st := s.waitReady("files")
	got, err := s.readFile("greeting.txt")
	s.g.Expect(err).NotTo(HaveOccurred())
	s.g.Expect(got).To(Equal("hello"))

	// Outputs: plain values verbatim, secret ones masked in status and kept in the Secret.
	s.g.Expect(string(st.Status.Outputs["digest"].Raw)).To(Equal(`"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"`))
	s.g.Expect(string(st.Status.Outputs["token"].Raw)).To(Equal(`"[secret]"`))
	lu := st.Status.LastUpdate
	s.g.Expect(lu).NotTo(BeNil())
	s.g.Expect(lu.State).To(Equal(pulumiv1.UpdateStateSucceeded))
	s.g.Expect(lu.Type).To(Equal("up"))
	s.g.Expect(lu.LastSuccessfulCommit).To(Equal("generation/1"))
	s.g.Expect(st.Status.CurrentUpdate).To(BeNil())
	s.g.Expect(st.Finalizers).To(ContainElement(pulumiv1.StackFinalizer))
	s.g.Expect(apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionReconciling)).To(BeNil())

	upd := &v1alpha1.Update{}
	s.g.Expect(env.Client.Get(s.ctx(), client.ObjectKey{Namespace: s.ns, Name: lu.Name}, upd)).To(Succeed())
	s.g.Expect(upd.Status.Phase).To(Equal(v1alpha1.UpdatePhaseSucceeded))
	s.g.Expect(upd.Status.Changes).To(HaveKeyWithValue("create", BeNumerically("==", 3)))
	s.g.Expect(upd.Status.StartTime).NotTo(BeNil())
	s.g.Expect(upd.Status.Runner).To(HavePrefix("local/"))
	s.g.Expect(metav1.IsControlledBy(upd, st)).To(BeTrue())

	outputs := &corev1.Secret{}
	s.g.Expect(env.Client.Get(s.ctx(), client.ObjectKey{Namespace: s.ns, Name: upd.Status.OutputsSecretName}, outputs)).To(Succeed())
	var token string
	s.g.Expect(json.Unmarshal(outputs.Data["token"], &token)).To(Succeed())
	s.g.Expect(token).To(HaveLen(24))
	s.g.Expect(outputs.Annotations[v1alpha1.SecretOutputsAnnotation]).To(Equal("token"))
	// The secret value appears nowhere but its Secret.
	for _, where := range []string{upd.Status.LogTail, upd.Status.Message, mustJSON(t, st.Status)} {
		s.g.Expect(where).NotTo(ContainSubstring(token))
	}

	// A Program change is rolled out without touching the Stack.
	s.patch(prog, func() { prog.Program.Resources["greeting"] = fileResource("greeting.txt", "hello again") })
	s.eventually(func(g Gomega) {
		got, err := s.readFile("greeting.txt")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal("hello again"))
	})
	st = s.waitReady("files")
	s.g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal("generation/2"))
	s.g.Expect(s.updates("files")).To(HaveLen(2))

	// Delete destroys first, then lets the Stack go.
	s.g.Expect(env.Client.Delete(s.ctx(), st)).To(Succeed())
	s.waitGone(st)
	s.requireDestroyed("greeting.txt")
}

// A Stack whose Program or Secret does not exist yet waits with a precise reason and
// proceeds by itself once they appear.
func TestStackReconciler_Reconcile_MissingReferencesWaitThenProceed(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	st := s.stack("waiting", "later")
	st.Spec.SecretsRef = map[string]pulumiv1.ResourceRef{"greeting": secretRefOf("creds", "greeting")}
	s.create(st)

	got := s.waitCondition("waiting", pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonSourceUnavailable)
	s.g.Expect(apimeta.FindStatusCondition(got.Status.Conditions, pulumiv1.ConditionReconciling).Message).To(ContainSubstring(`Program "later" not found`))
	s.g.Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, pulumiv1.ConditionStalled)).To(BeFalse())

	prog := s.program("later", map[string]pulumiv1.Resource{"f": fileResource("secret.txt", "${greeting}")}, nil)
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"greeting": {Type: "String"}}
	s.create(prog)
	got = s.waitCondition("waiting", pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonConfigUnavailable)
	s.g.Expect(apimeta.FindStatusCondition(got.Status.Conditions, pulumiv1.ConditionReady).Message).To(ContainSubstring(`Secret "creds" not found`))

	s.create(secretOf(s.ns, "creds", map[string]string{"greeting": "psst"}))
	s.waitReady("waiting")
	content, err := s.readFile("secret.txt")
	s.g.Expect(err).NotTo(HaveOccurred())
	s.g.Expect(content).To(Equal("psst"))
}

// A resource failing twice converges after two retries; lastUpdate.failures counts the
// consecutive failures meanwhile, and the failed attempts stay on record.
func TestStackReconciler_Reconcile_RetriesFailuresThenConverges(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("flaky", map[string]pulumiv1.Resource{"f": flakyResource(2, 0)}, nil))
	s.create(s.stack("flaky", "flaky"))

	s.eventually(func(g Gomega) {
		lu := s.get(g, "flaky").Status.LastUpdate
		g.Expect(lu).NotTo(BeNil())
		g.Expect(lu.Failures).To(Equal(int64(2)))
		g.Expect(lu.Message).To(ContainSubstring("induced failure 2 of 2"))
	})
	st := s.waitReady("flaky")
	s.g.Expect(st.Status.LastUpdate.Failures).To(BeZero())
	s.g.Expect(st.Status.Stackwright.PermanentFailures).To(BeZero())
	attempts := map[int32]v1alpha1.UpdatePhase{}
	for _, u := range s.updates("flaky") {
		attempts[u.Spec.Attempt] = u.Status.Phase
	}
	s.g.Expect(attempts).To(Equal(map[int32]v1alpha1.UpdatePhase{
		1: v1alpha1.UpdatePhaseFailed, 2: v1alpha1.UpdatePhaseFailed, 3: v1alpha1.UpdatePhaseSucceeded,
	}))
}

// Permanent failures stall the Stack with the engine's message; the reconcile-request
// annotation retries it at once.
func TestStackReconciler_Reconcile_PermanentFailuresStallUntilRequested(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("broken", map[string]pulumiv1.Resource{"f": flakyResource(100, 0)}, nil))
	s.create(s.stack("broken", "broken"))

	st := s.waitCondition("broken", pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonUpdateFailed)
	s.g.Expect(apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled).Message).To(ContainSubstring("induced failure 3 of 100"))
	s.g.Expect(st.Status.ObservedGeneration).To(Equal(st.Generation))
	// Stalled means stalled: no retry however long it waits (the next backoff would be 9s).
	s.g.Consistently(func() int { return len(s.updates("broken")) }).WithTimeout(10 * time.Second).Should(Equal(3))

	// A spec change is a new desired state: retried at once, three more times.
	s.patch(st, func() { st.Spec.Refresh = true })
	s.eventually(func(g Gomega) {
		g.Expect(s.get(g, "broken").Status.LastUpdate.Message).To(ContainSubstring("induced failure 4 of 100"))
	})
	st = s.waitCondition("broken", pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonUpdateFailed)

	s.patch(st, func() { st.Annotations = map[string]string{pulumiv1.ReconcileRequestAnnotation: "try-again"} })
	s.eventually(func(g Gomega) {
		got := s.get(g, "broken")
		g.Expect(got.Status.ObservedReconcileRequest).To(Equal("try-again"))
		g.Expect(got.Status.LastUpdate.Message).To(ContainSubstring("induced failure 7 of 100"))
	})
}

// Changing a referenced Secret's value is a new desired state; the value reaches the
// program but never the Stack's status, events, Updates or the manager's logs.
func TestStackReconciler_Reconcile_SecretChangeRerunsWithoutLeaking(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	envRes := pulumiv1.Resource{Type: "stackwright-testing:index:Environment", Properties: map[string]apiextensionsv1.JSON{"prefix": jsonValue("STACKWRIGHT_CANARY")}}
	prog := s.program("secretive", map[string]pulumiv1.Resource{"f": fileResource("secret.txt", "${password}"), "env": envRes},
		map[string]string{"echo": "${f.content}", "envNames": "${env.names}"})
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"password": {Type: "String"}}
	s.create(prog)
	sec := secretOf(s.ns, "db", map[string]string{"password": "first-Sup3rSecret-value"})
	s.create(sec)
	st := s.stack("secretive", "secretive")
	st.Spec.SecretsRef = map[string]pulumiv1.ResourceRef{"password": secretRefOf("db", "password")}
	// The same value as an environment variable of the program (envRefs).
	st.Spec.EnvRefs["STACKWRIGHT_CANARY"] = st.Spec.SecretsRef["password"]
	s.create(st)
	s.waitReady("secretive")

	s.patch(sec, func() { sec.StringData = map[string]string{"password": "second-Sup3rSecret-value"} })
	s.eventually(func(g Gomega) {
		content, err := s.readFile("secret.txt")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(content).To(Equal("second-Sup3rSecret-value"))
	})
	st = s.waitReady("secretive")
	s.g.Expect(s.updates("secretive")).To(HaveLen(2))
	s.g.Expect(string(st.Status.Outputs["echo"].Raw)).To(Equal(`"[secret]"`))
	s.g.Expect(string(st.Status.Outputs["envNames"].Raw)).To(Equal(`["STACKWRIGHT_CANARY"]`), "the secret environment variable reaches the program")
	program := &pulumiv1.Program{}
	s.g.Expect(env.Client.Get(s.ctx(), client.ObjectKey{Namespace: s.ns, Name: "secretive"}, program)).To(Succeed())
	families, err := ctrlmetrics.Registry.Gather()
	s.g.Expect(err).NotTo(HaveOccurred())

	var events eventsv1.EventList
	s.g.Expect(env.Client.List(s.ctx(), &events, client.InNamespace(s.ns))).To(Succeed())
	s.g.Expect(events.Items).NotTo(BeEmpty())
	haystacks := map[string]string{
		"stack":   mustJSON(t, st),
		"events":  mustJSON(t, events.Items),
		"updates": mustJSON(t, s.updates("secretive")),
		"logs":    kubetest.Logs.String(),
		"program": mustJSON(t, program),
		"metrics": mustJSON(t, families),
	}
	for where, text := range haystacks {
		for _, secret := range []string{"first-Sup3rSecret-value", "second-Sup3rSecret-value"} {
			s.g.Expect(text).NotTo(ContainSubstring(secret), "secret value leaked into %s", where)
		}
	}
}

// With nothing changing, nothing runs: no Update over three resync periods, unless
// continueResyncOnCommitMatch asks for periodic re-runs.
func TestStackReconciler_Reconcile_IdleStackRunsNothingUntilResyncAsked(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("idle", map[string]pulumiv1.Resource{"f": fileResource("idle.txt", "x")}, nil))
	quiet := s.stack("quiet", "idle")
	quiet.Spec.ResyncFrequencySeconds = 10
	s.create(quiet)
	busy := s.stack("busy", "idle")
	busy.Spec.ResyncFrequencySeconds = 10
	busy.Spec.ContinueResyncOnCommitMatch = true
	busy.Spec.EnvRefs["STACKWRIGHT_TESTING_ROOT"] = literal(t.TempDir())
	s.create(busy)
	s.waitReady("quiet")
	s.waitReady("busy")

	s.g.Consistently(func() int { return len(s.updates("quiet")) }).WithTimeout(31 * time.Second).WithPolling(time.Second).Should(Equal(1))
	s.g.Expect(len(s.updates("busy"))).To(BeNumerically(">=", 3), "continueResyncOnCommitMatch re-runs every period")
	s.g.Expect(s.get(s.g, "quiet").Status.LastUpdate.Name).To(Equal(s.updates("quiet")[0].Name))
}

// destroy failing keeps the finalizer and says why; a later retry succeeds and releases it.
func TestStackReconciler_Delete_FailedDestroyKeepsFinalizer(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("sticky", map[string]pulumiv1.Resource{"f": flakyResource(0, 2)}, nil))
	st := s.stack("sticky", "sticky")
	s.create(st)
	st = s.waitReady("sticky")
	s.g.Expect(env.Client.Delete(s.ctx(), st)).To(Succeed())

	s.eventually(func(g Gomega) {
		got := s.get(g, "sticky")
		g.Expect(got.Finalizers).To(ContainElement(pulumiv1.StackFinalizer))
		g.Expect(got.Status.LastUpdate.Type).To(Equal("destroy"))
		g.Expect(got.Status.LastUpdate.State).To(Equal(pulumiv1.UpdateStateFailed))
		g.Expect(got.Status.LastUpdate.Message).To(ContainSubstring("induced failure 2 of 2"))
		ready := apimeta.FindStatusCondition(got.Status.Conditions, pulumiv1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring("destroy failed"))
		g.Expect(ready.Message).To(ContainSubstring("induced failure 2 of 2"))
	})
	s.waitGone(st)
}

// A terminating namespace refuses new objects, so the destroy runs without an Update
// object. Deleting the namespace deletes the Stack's inputs with it, but the finalizer on
// them keeps them until the destroy has read them; an input deleted by hand beforehand is
// not held up, and its Stack, whose destroy can then never run, is released (with a
// warning) instead of blocking the namespace forever.
func TestStackReconciler_Delete_TerminatingNamespaceKeepsInputsUntilDestroyed(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("ns", map[string]pulumiv1.Resource{"f": fileResource("ns.txt", "x")}, nil))
	withSecret := func(st *pulumiv1.Stack, secret string) *pulumiv1.Stack {
		st.Spec.SecretsRef = map[string]pulumiv1.ResourceRef{"unused": secretRefOf(secret, "k")}
		return st
	}
	kept, byHand := secretOf(s.ns, "kept", map[string]string{"k": "v"}), secretOf(s.ns, "by-hand", map[string]string{"k": "v"})
	s.create(kept)
	s.create(byHand)
	destroyed := withSecret(s.stack("destroyed", "ns"), "kept")
	s.create(destroyed)
	strandedFiles := t.TempDir()
	stranded := withSecret(s.stack("stranded", "ns"), "by-hand")
	stranded.Spec.EnvRefs["STACKWRIGHT_TESTING_ROOT"] = literal(strandedFiles)
	s.create(stranded)
	destroyed, stranded = s.waitReady("destroyed"), s.waitReady("stranded")
	for _, sec := range []*corev1.Secret{kept, byHand} {
		s.eventually(func(g Gomega) {
			g.Expect(s.kube.Get(sec)).To(Succeed())
			g.Expect(sec.Finalizers).To(ContainElement(pulumiv1.InputsFinalizer))
		})
	}
	// Deleting an input by hand is not held up.
	s.g.Expect(env.Client.Delete(s.ctx(), byHand)).To(Succeed())
	s.kube.WaitGone(byHand)

	// envtest runs no namespace controller: the namespace stays Terminating and deletes
	// nothing, so the test plays its part for the Secret and the Stacks.
	s.g.Expect(env.Client.Delete(s.ctx(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}})).To(Succeed())
	s.g.Expect(env.Client.Delete(s.ctx(), kept)).To(Succeed())
	s.g.Expect(env.Client.Delete(s.ctx(), destroyed)).To(Succeed())
	s.g.Expect(env.Client.Delete(s.ctx(), stranded)).To(Succeed())
	s.waitGone(destroyed)
	s.waitGone(stranded)
	s.requireDestroyed("ns.txt")
	// The input outlived the Stack's destroy, and not the Stack.
	s.kube.WaitGone(kept)
	_, err := os.Stat(filepath.Join(strandedFiles, "ns.txt"))
	s.g.Expect(err).NotTo(HaveOccurred(), "the stranded Stack's resources were destroyed")
	// Events are refused in a terminating namespace too; the log keeps the explanation.
	var released []string
	for _, line := range strings.Split(kubetest.Logs.String(), "\n") {
		if strings.Contains(line, "Released finalizer without destroy") && strings.Contains(line, s.ns) {
			released = append(released, line)
		}
	}
	s.g.Expect(released).To(ConsistOf(And(ContainSubstring(`"name": "stranded"`), ContainSubstring("by-hand"), ContainSubstring("not found"))))
}

// Only destroyOnFinalize Stacks protect their inputs, and a Stack's deletion releases
// what no other Stack still needs.
func TestStackReconciler_Protect_OnlyWhatADestroyNeeds(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("p", map[string]pulumiv1.Resource{"f": fileResource("p.txt", "x")}, nil))
	shared, own := secretOf(s.ns, "shared", map[string]string{"k": "v"}), secretOf(s.ns, "own", map[string]string{"k": "v"})
	unprotected := secretOf(s.ns, "unprotected", map[string]string{"k": "v"})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "envs", Namespace: s.ns}, Data: map[string]string{"A": "1"}}
	for _, o := range []client.Object{shared, own, unprotected, cm} {
		s.create(o)
	}
	first := s.stack("first", "p")
	first.Spec.SecretsRef = map[string]pulumiv1.ResourceRef{"a": secretRefOf("shared", "k"), "b": secretRefOf("own", "k")}
	first.Spec.Envs = []string{"envs"}
	second := s.stack("second", "p")
	second.Spec.EnvRefs["S"] = secretRefOf("shared", "k")
	second.Spec.EnvRefs["STACKWRIGHT_TESTING_ROOT"] = literal(t.TempDir())
	keeper := s.stack("keeper", "p")
	keeper.Spec.DestroyOnFinalize = false
	keeper.Spec.EnvRefs["U"] = secretRefOf("unprotected", "k")
	keeper.Spec.EnvRefs["STACKWRIGHT_TESTING_ROOT"] = literal(t.TempDir())
	for _, st := range []*pulumiv1.Stack{first, second, keeper} {
		s.create(st)
	}
	first = s.waitReady("first")
	s.waitReady("second")
	s.waitReady("keeper")

	finalizers := func(o client.Object) []string {
		s.t.Helper()
		s.g.Expect(s.kube.Get(o)).To(Succeed())
		return o.GetFinalizers()
	}
	s.eventually(func(g Gomega) {
		for _, o := range []client.Object{shared, own, cm} {
			g.Expect(finalizers(o)).To(ContainElement(pulumiv1.InputsFinalizer), o.GetName())
		}
	})
	s.g.Expect(finalizers(unprotected)).NotTo(ContainElement(pulumiv1.InputsFinalizer), "a Stack that keeps its resources needs no input kept")

	s.g.Expect(env.Client.Delete(s.ctx(), first)).To(Succeed())
	s.waitGone(first)
	s.g.Expect(finalizers(own)).NotTo(ContainElement(pulumiv1.InputsFinalizer))
	s.g.Expect(finalizers(cm)).NotTo(ContainElement(pulumiv1.InputsFinalizer))
	s.g.Expect(finalizers(shared)).To(ContainElement(pulumiv1.InputsFinalizer), "the second Stack still needs it")
}

// Protecting an input changes its metadata, not its content: a Stack already deployed
// with it does not run again when another Stack starts protecting it.
func TestStackReconciler_Protect_DoesNotRerunStacksSharingTheInput(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("p", map[string]pulumiv1.Resource{"f": fileResource("${pulumi.stack}.txt", "x")}, nil))
	shared := secretOf(s.ns, "shared", map[string]string{"k": "v"})
	s.create(shared)
	ref := secretRefOf("shared", "k")
	keeper := s.stack("keeper", "p")
	keeper.Spec.DestroyOnFinalize = false
	keeper.Spec.SecretsRef = map[string]pulumiv1.ResourceRef{"a": ref}
	s.create(keeper)
	s.waitReady("keeper")
	s.g.Expect(s.updates("keeper")).To(HaveLen(1))

	protector := s.stack("protector", "p")
	protector.Spec.SecretsRef = map[string]pulumiv1.ResourceRef{"a": ref}
	s.create(protector)
	s.waitReady("protector")
	s.eventually(func(g Gomega) {
		g.Expect(s.kube.Get(shared)).To(Succeed())
		g.Expect(shared.Finalizers).To(ContainElement(pulumiv1.InputsFinalizer))
	})
	// The Secret's change reaches the keeper within a reconcile; three seconds is many.
	s.g.Consistently(func() []v1alpha1.Update { return s.updates("keeper") }).
		WithTimeout(3*time.Second).WithPolling(200*time.Millisecond).Should(HaveLen(1), "the keeper ran again")
}

// Deleting a Stack without destroyOnFinalize leaves its resources in place.
func TestStackReconciler_Delete_WithoutDestroyOnFinalizeKeepsResources(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("keep", map[string]pulumiv1.Resource{"f": fileResource("kept.txt", "still here")}, nil))
	st := s.stack("keep", "keep")
	st.Spec.DestroyOnFinalize = false
	s.create(st)
	st = s.waitReady("keep")
	s.g.Expect(env.Client.Delete(s.ctx(), st)).To(Succeed())
	s.waitGone(st)
	content, err := s.readFile("kept.txt")
	s.g.Expect(err).NotTo(HaveOccurred())
	s.g.Expect(content).To(Equal("still here"))
}

// The Program can be deleted before the Stack: destroy uses the last artifact.
func TestStackReconciler_Delete_AfterProgramDeletedUsesLastArtifact(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	prog := s.program("gone", map[string]pulumiv1.Resource{"f": fileResource("orphan.txt", "x")}, nil)
	s.create(prog)
	st := s.stack("gone", "gone")
	s.create(st)
	st = s.waitReady("gone")
	s.g.Expect(env.Client.Delete(s.ctx(), prog)).To(Succeed())
	s.g.Expect(env.Client.Delete(s.ctx(), st)).To(Succeed())
	s.waitGone(st)
	s.requireDestroyed("orphan.txt")
}

// preview: true only ever previews: nothing is created, and the Stack is Ready.
func TestStackReconciler_Reconcile_PreviewStackOnlyPreviews(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("look", map[string]pulumiv1.Resource{"f": fileResource("never.txt", "x")}, nil))
	st := s.stack("look", "look")
	st.Spec.Preview = true
	s.create(st)
	st = s.waitReady("look")
	s.g.Expect(st.Status.LastUpdate.Type).To(Equal("preview"))
	ups := s.updates("look")
	s.g.Expect(ups).To(HaveLen(1))
	s.g.Expect(ups[0].Status.Changes).To(HaveKeyWithValue("create", BeNumerically("==", 2)))
	_, err := s.readFile("never.txt")
	s.g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue())
}

// A suspended Stack runs nothing, however its source changes.
func TestStackReconciler_Reconcile_SuspendedStackRunsNothing(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("paused", map[string]pulumiv1.Resource{"f": fileResource("paused.txt", "x")}, nil))
	st := s.stack("paused", "paused")
	st.Spec.Stackwright = &pulumiv1.StackwrightSpec{Suspend: true}
	s.create(st)
	s.waitCondition("paused", pulumiv1.ConditionSuspended, metav1.ConditionTrue, pulumiv1.ReasonSuspended)
	s.g.Consistently(func() int { return len(s.updates("paused")) }).WithTimeout(3 * time.Second).Should(BeZero())

	st = s.get(s.g, "paused")
	s.patch(st, func() { st.Spec.Stackwright = nil })
	s.waitReady("paused")
	s.g.Expect(apimeta.FindStatusCondition(s.get(s.g, "paused").Status.Conditions, pulumiv1.ConditionSuspended)).To(BeNil())
}

// Crash safety: an Update recorded in status.currentUpdate but never created (the manager
// died between the two writes) is created under exactly that name, and only once.
func TestStackReconciler_Reconcile_RecordedUpdateCreatedUnderRecordedName(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("crash", map[string]pulumiv1.Resource{"f": fileResource("crash.txt", "x")}, nil))
	st := s.stack("crash", "crash")
	st.Spec.Stackwright = &pulumiv1.StackwrightSpec{Suspend: true}
	s.create(st)
	st = s.waitCondition("crash", pulumiv1.ConditionSuspended, metav1.ConditionTrue, pulumiv1.ReasonSuspended)

	// What a manager that crashed right after recording its intent leaves behind.
	base := st.DeepCopy()
	st.Status.CurrentUpdate = &pulumiv1.CurrentStackUpdate{Name: "crash-recorded-1", Generation: st.Generation}
	st.Status.Stackwright = &pulumiv1.StackwrightStatus{LastAttemptedKey: "recorded", Attempt: 1}
	s.g.Expect(env.Client.Status().Patch(s.ctx(), st, client.MergeFrom(base))).To(Succeed())
	st = s.get(s.g, "crash")
	s.patch(st, func() { st.Spec.Stackwright = nil })

	st = s.waitReady("crash")
	ups := s.updates("crash")
	s.g.Expect(ups).To(HaveLen(1))
	s.g.Expect(ups[0].Name).To(Equal("crash-recorded-1"))
	s.g.Expect(st.Status.LastUpdate.Name).To(Equal("crash-recorded-1"))
}

// A Running Update whose runner died (the manager restarted) is failed by the Update
// controller and retried by the Stack controller.
func TestStackReconciler_Reconcile_LostUpdateRetried(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("lost", map[string]pulumiv1.Resource{"f": fileResource("lost.txt", "x")}, nil))
	st := s.stack("lost", "lost")
	st.Spec.Stackwright = &pulumiv1.StackwrightSpec{Suspend: true}
	s.create(st)
	st = s.waitCondition("lost", pulumiv1.ConditionSuspended, metav1.ConditionTrue, pulumiv1.ReasonSuspended)

	orphan := &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: "lost-orphan-1", Namespace: s.ns},
		Spec:       v1alpha1.UpdateSpec{StackName: "lost", Type: v1alpha1.UpdateTypeUp, Attempt: 1},
	}
	s.create(orphan)
	base := orphan.DeepCopy()
	orphan.Status.Phase, orphan.Status.Runner = v1alpha1.UpdatePhaseRunning, "local/previous-manager/1/abcdef"
	s.g.Expect(env.Client.Status().Patch(s.ctx(), orphan, client.MergeFrom(base))).To(Succeed())
	s.eventually(func(g Gomega) {
		u := &v1alpha1.Update{}
		g.Expect(env.Client.Get(s.ctx(), client.ObjectKeyFromObject(orphan), u)).To(Succeed())
		g.Expect(u.Status.Phase).To(Equal(v1alpha1.UpdatePhaseFailed))
		c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha1.ReasonRunnerLost))
	})

	stBase := st.DeepCopy()
	st.Status.CurrentUpdate = &pulumiv1.CurrentStackUpdate{Name: "lost-orphan-1", Generation: st.Generation}
	st.Status.Stackwright = &pulumiv1.StackwrightStatus{LastAttemptedKey: "orphaned", Attempt: 1}
	s.g.Expect(env.Client.Status().Patch(s.ctx(), st, client.MergeFrom(stBase))).To(Succeed())
	st = s.get(s.g, "lost")
	s.patch(st, func() { st.Spec.Stackwright = nil })
	s.waitReady("lost")
	content, err := s.readFile("lost.txt")
	s.g.Expect(err).NotTo(HaveOccurred())
	s.g.Expect(content).To(Equal("x"))
}

// identityTokens asks for one token announced to AWS.
func identityTokens() *pulumiv1.StackwrightSpec {
	return &pulumiv1.StackwrightSpec{IdentityTokens: []pulumiv1.IdentityToken{{Audience: "sts.amazonaws.com", Announce: pulumiv1.AnnounceAWS}}}
}

// Under the local executor a Stack asking for identity tokens is stalled, not run without
// them, whether it is new or already deployed; dropping the tokens lets it run again.
func TestStackReconciler_Reconcile_IdentityTokensNeedJobExecutor(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("federated", map[string]pulumiv1.Resource{"f": fileResource("federated.txt", "x")}, nil))
	fresh := s.stack("fresh", "federated")
	fresh.Spec.Stackwright = identityTokens()
	s.create(fresh)
	deployed := s.stack("deployed", "federated")
	deployed.Spec.EnvRefs["STACKWRIGHT_TESTING_ROOT"] = literal(t.TempDir())
	s.create(deployed)
	deployed = s.waitReady("deployed")
	s.patch(deployed, func() { deployed.Spec.Stackwright = identityTokens() })

	for _, name := range []string{"fresh", "deployed"} {
		st := s.waitCondition(name, pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonSpecInvalid)
		s.g.Expect(apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled).Message).To(HavePrefix("spec.stackwright.identityTokens needs the job executor"))
		s.g.Expect(apimeta.IsStatusConditionFalse(st.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue())
		s.g.Expect(st.Status.ObservedGeneration).To(Equal(st.Generation))
	}
	s.g.Consistently(func() []int { return []int{len(s.updates("fresh")), len(s.updates("deployed"))} }).WithTimeout(3 * time.Second).Should(Equal([]int{0, 1}))
	_, err := s.readFile("federated.txt")
	s.g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "the Stack ran without its tokens: %v", err)

	fresh = s.get(s.g, "fresh")
	s.patch(fresh, func() { fresh.Spec.Stackwright = nil })
	s.waitReady("fresh")
}

// Deleting a Stack that asks for identity tokens under the local executor does not destroy
// without them: the finalizer stays, stalled, until the tokens are dropped from the spec.
func TestStackReconciler_Delete_IdentityTokensStallDestroyUntilRemoved(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("federated", map[string]pulumiv1.Resource{"f": fileResource("federated.txt", "x")}, nil))
	st := s.stack("federated", "federated")
	s.create(st)
	st = s.waitReady("federated")
	s.patch(st, func() { st.Spec.Stackwright = identityTokens() })
	st = s.waitCondition("federated", pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonSpecInvalid)

	s.g.Expect(env.Client.Delete(s.ctx(), st)).To(Succeed())
	s.g.Consistently(func(g Gomega) {
		got := s.get(g, "federated")
		g.Expect(got.Finalizers).To(ContainElement(pulumiv1.StackFinalizer))
		g.Expect(apimeta.FindStatusCondition(got.Status.Conditions, pulumiv1.ConditionStalled).Message).To(HavePrefix("spec.stackwright.identityTokens needs"))
	}).WithTimeout(3 * time.Second).Should(Succeed())
	s.g.Expect(s.updates("federated")).To(HaveLen(1), "no destroy ran")
	content, err := s.readFile("federated.txt")
	s.g.Expect(err).NotTo(HaveOccurred())
	s.g.Expect(content).To(Equal("x"))

	st = s.get(s.g, "federated")
	s.patch(st, func() { st.Spec.Stackwright = nil })
	s.waitGone(st)
	s.requireDestroyed("federated.txt")
}

// In a terminating namespace no runner Pod can ever carry the tokens, so the finalizer of a
// Stack asking for them is released with the explanation, instead of blocking the
// namespace or destroying without them.
func TestStackReconciler_Delete_IdentityTokensInTerminatingNamespaceReleased(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("federated", map[string]pulumiv1.Resource{"f": fileResource("federated.txt", "x")}, nil))
	st := s.stack("federated", "federated")
	s.create(st)
	st = s.waitReady("federated")
	s.patch(st, func() { st.Spec.Stackwright = identityTokens() })
	st = s.waitCondition("federated", pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonSpecInvalid)

	s.g.Expect(env.Client.Delete(s.ctx(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}})).To(Succeed())
	s.g.Expect(env.Client.Delete(s.ctx(), st)).To(Succeed())
	s.waitGone(st)
	content, err := s.readFile("federated.txt")
	s.g.Expect(err).NotTo(HaveOccurred(), "destroyed without the tokens")
	s.g.Expect(content).To(Equal("x"))
	// The line is logged once the finalizer is gone, which the test may see first.
	s.eventually(func(g Gomega) {
		var kept []string
		for _, line := range strings.Split(kubetest.Logs.String(), "\n") {
			if strings.Contains(line, "Released finalizer without destroy") && strings.Contains(line, s.ns) {
				kept = append(kept, line)
			}
		}
		g.Expect(kept).To(ConsistOf(ContainSubstring("spec.stackwright.identityTokens needs a runner Pod")))
	})
}

// An Update of a Stack asking for identity tokens that reaches the local executor anyway
// (created before the manager switched executors) fails without running.
func TestStackReconciler_Reconcile_IdentityTokensUpdateRefusedByLocalRunner(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("federated", map[string]pulumiv1.Resource{"f": fileResource("federated.txt", "x")}, nil))
	st := s.stack("federated", "federated")
	st.Spec.Stackwright = identityTokens()
	st.Spec.Stackwright.Suspend = true
	s.create(st)
	st = s.waitCondition("federated", pulumiv1.ConditionSuspended, metav1.ConditionTrue, pulumiv1.ReasonSuspended)

	u := &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: "federated-earlier-1", Namespace: s.ns},
		Spec:       v1alpha1.UpdateSpec{StackName: "federated", Type: v1alpha1.UpdateTypeUp, Attempt: 1},
	}
	s.g.Expect(controllerutil.SetControllerReference(st, u, env.Scheme)).To(Succeed())
	// Its Stack recorded it, as the Stack controller records every Update it creates.
	st.Status.CurrentUpdate = &pulumiv1.CurrentStackUpdate{Name: u.Name, Generation: st.Generation}
	s.g.Expect(env.Client.Status().Update(s.ctx(), st)).To(Succeed())
	s.create(u)
	s.eventually(func(g Gomega) {
		g.Expect(env.Client.Get(s.ctx(), client.ObjectKeyFromObject(u), u)).To(Succeed())
		g.Expect(u.Status.Phase).To(Equal(v1alpha1.UpdatePhaseFailed))
		c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha1.ReasonPermanentFailure))
		g.Expect(c.Message).To(ContainSubstring("spec.stackwright.identityTokens needs the job executor"))
	})
	_, err := s.readFile("federated.txt")
	s.g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "the Update ran without its tokens: %v", err)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Admission lets through what PKO's does; a spec that cannot run as written (here: two
// sources, and a lower-case reference type) stalls with Review's words before anything is
// fetched or run, and runs again once fixed.
func TestStackReconciler_Reconcile_SpecAdmittedButInvalidStalls(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("ambiguous", map[string]pulumiv1.Resource{"f": fileResource("ambiguous.txt", "x")}, nil))
	st := s.stack("ambiguous", "ambiguous")
	st.Spec.EnvRefs["STACKWRIGHT_TESTING_ROOT"] = literal(t.TempDir())
	st.Spec.FluxSource = &pulumiv1.FluxSource{SourceRef: pulumiv1.FluxSourceReference{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: "GitRepository", Name: "repo"}}
	st.Spec.EnvRefs["REGION"] = pulumiv1.ResourceRef{Type: "literal", ResourceSelector: pulumiv1.ResourceSelector{Literal: &pulumiv1.LiteralRef{Value: "eu"}}}
	s.create(st)

	st = s.waitCondition("ambiguous", pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonSpecInvalid)
	msg := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled).Message
	s.g.Expect(msg).To(ContainSubstring("spec sets 2 sources (spec.fluxSource, spec.programRef)"))
	s.g.Expect(msg).To(ContainSubstring(`spec.envRefs[REGION]: type "literal" is not one of Env, FS, Secret, Literal`))
	s.g.Expect(st.Status.ObservedGeneration).To(Equal(st.Generation))
	s.g.Expect(apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionSourceReady)).To(BeNil(), "nothing may be fetched for an invalid spec")
	s.g.Consistently(func() int { return len(s.updates("ambiguous")) }).WithTimeout(2 * time.Second).Should(BeZero())

	s.patch(st, func() {
		st.Spec.FluxSource = nil
		st.Spec.EnvRefs["REGION"] = literal("eu")
	})
	s.waitReady("ambiguous")
}

// A Stack applied as PKO's older pulumi.com/v1alpha1 is the same object as its v1 form:
// the controller, which reads v1, deploys it, and it reads back under either version.
func TestStackReconciler_Reconcile_V1alpha1StackIsReconciled(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("legacy", map[string]pulumiv1.Resource{"f": fileResource("legacy.txt", "old manifests still work")}, nil))
	st := s.stack("legacy", "legacy")
	st.Spec.EnvRefs["STACKWRIGHT_TESTING_ROOT"] = literal(t.TempDir())
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
	s.g.Expect(err).NotTo(HaveOccurred())
	legacy := &unstructured.Unstructured{Object: content}
	legacy.SetAPIVersion("pulumi.com/v1alpha1")
	legacy.SetKind("Stack")
	s.create(legacy)

	ready := s.waitReady("legacy")
	back := &unstructured.Unstructured{}
	back.SetAPIVersion("pulumi.com/v1alpha1")
	back.SetKind("Stack")
	s.g.Expect(env.Client.Get(s.ctx(), client.ObjectKeyFromObject(ready), back)).To(Succeed())
	s.g.Expect(back.GetAPIVersion()).To(Equal("pulumi.com/v1alpha1"))
	got, _, _ := unstructured.NestedString(back.Object, "status", "lastUpdate", "state")
	s.g.Expect(got).To(Equal(string(pulumiv1.UpdateStateSucceeded)))
}

// docs/migration-from-pko.md, step 4: Stackwright takes over Stacks as PKO left them (PKO's
// finalizer, status and condition reasons; one of them stopped with an update in flight)
// and runs one up for each, after which they are Ready under Stackwright and delete as
// before. Suspension stands in for "no controller yet": it lets the test write PKO's status
// before Stackwright acts on the Stack.
func TestStackReconciler_Reconcile_AdoptsStacksLeftByPKO(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("adopted", map[string]pulumiv1.Resource{"f": fileResource("adopted.txt", "x")}, nil))
	finished := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	pkoStatus := func(inFlight bool) pulumiv1.StackStatus {
		st := pulumiv1.StackStatus{
			ObservedGeneration: 1,
			Outputs:            map[string]apiextensionsv1.JSON{"bucket": {Raw: []byte(`"b-123"`)}},
			LastUpdate: &pulumiv1.StackUpdateState{
				Generation: 1, Name: "adopted-pko-1", Type: "up", State: pulumiv1.UpdateStateSucceeded,
				LastAttemptedCommit: "1", LastSuccessfulCommit: "1", LastResyncTime: &finished,
			},
			Conditions: []metav1.Condition{{Type: pulumiv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "ProcessingCompleted", Message: "the stack has been processed and is up to date", LastTransitionTime: finished, ObservedGeneration: 1}},
		}
		if inFlight {
			st.CurrentUpdate = &pulumiv1.CurrentStackUpdate{Generation: 1, Name: "inflight-pko-2", Commit: "1"}
		}
		return st
	}
	for _, name := range []string{"adopted", "inflight"} {
		st := s.stack(name, "adopted")
		st.Finalizers = []string{pulumiv1.StackFinalizer}
		st.Spec.Stackwright = &pulumiv1.StackwrightSpec{Suspend: true}
		s.create(st)
		s.waitCondition(name, pulumiv1.ConditionSuspended, metav1.ConditionTrue, pulumiv1.ReasonSuspended)
		s.eventually(func(g Gomega) {
			st := s.get(g, name)
			st.Status = pkoStatus(name == "inflight")
			g.Expect(env.Client.Status().Update(s.ctx(), st)).To(Succeed())
		})
		st = s.get(s.g, name)
		s.patch(st, func() { st.Spec.Stackwright = nil })
	}

	for _, name := range []string{"adopted", "inflight"} {
		st := s.waitReady(name)
		s.g.Expect(st.Finalizers).To(Equal([]string{pulumiv1.StackFinalizer}), "PKO's finalizer is Stackwright's: kept, not doubled")
		s.g.Expect(st.Status.LastUpdate.State).To(Equal(pulumiv1.UpdateStateSucceeded))
		s.g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(HavePrefix("generation/"))
		s.g.Expect(apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionReady).Reason).To(Equal(pulumiv1.ReasonProcessingCompleted))
		ups := s.updates(name)
		s.g.Expect(ups).To(HaveLen(1), "one up per adopted Stack")
		s.g.Expect(ups[0].Spec.Type).To(Equal(v1alpha1.UpdateTypeUp))
	}

	st := s.get(s.g, "adopted")
	s.g.Expect(env.Client.Delete(s.ctx(), st)).To(Succeed())
	s.waitGone(st)
}

// A Stack importing Pulumi ESC environments on a self-managed backend (the manager's own
// file:// backend here) runs one up, which the CLI refuses with its own reason; the Stack
// stalls at once saying so, and does not retry what cannot succeed.
func TestStackReconciler_Reconcile_ESCEnvironmentOnSelfManagedBackendStalls(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("esc", map[string]pulumiv1.Resource{"f": fileResource("esc.txt", "x")}, nil))
	st := s.stack("esc", "esc")
	st.Spec.Environment = []string{"platform/dev", "defaults"}
	// The destroy would be refused for the same reason, holding the Stack's finalizer.
	st.Spec.DestroyOnFinalize = false
	s.create(st)

	st = s.waitCondition("esc", pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonSpecInvalid)
	msg := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled).Message
	for _, want := range []string{
		"up failed because the stack's backend cannot serve what the spec asks of it",
		"does not support environments; Pulumi ESC environments require the Pulumi Cloud backend",
		"Pulumi ESC environments (spec.environment) need a Pulumi Cloud backend",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Stalled message = %q; want it to contain %q", msg, want)
		}
	}
	// Retries would start within a second (the suite's RetryBase) and keep coming.
	time.Sleep(3 * time.Second)
	ups := s.updates("esc")
	if len(ups) != 1 {
		t.Fatalf("%d Updates; want the one up, not retried", len(ups))
	}
	if c := apimeta.FindStatusCondition(ups[0].Status.Conditions, v1alpha1.ConditionComplete); c == nil || c.Reason != v1alpha1.ReasonBackendUnsupported {
		t.Errorf("Update's Complete condition = %+v; want reason BackendUnsupported", c)
	}
	if _, err := s.readFile("esc.txt"); err == nil {
		t.Error("esc.txt exists: the program ran without the configuration its environments give")
	}
}

// A Stack on Pulumi Cloud (a fake of the endpoints the CLI calls) imports its ESC
// environments in the spec's order, and their values reach its program.
func TestStackReconciler_Reconcile_ESCEnvironmentOnPulumiCloudReachesProgram(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	cloud := pulumicloud.New(t, "acme", "pul-fake-token")
	cloud.SetEnvironment("platform/base", map[string]any{"greeting": "from base", "farewell": "bye"})
	cloud.SetEnvironment("team/dev", map[string]any{"greeting": "from team/dev"})
	prog := s.program("escgreet", map[string]pulumiv1.Resource{"f": fileResource("esc-greeting.txt", "${greeting}, ${farewell}")}, nil)
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"greeting": {Type: "String"}, "farewell": {Type: "String"}}
	s.create(prog)
	st := s.stack("esccloud", "escgreet")
	st.Spec.Stack = "acme/escgreet/dev"
	st.Spec.Backend = cloud.URL
	st.Spec.EnvRefs["PULUMI_ACCESS_TOKEN"] = literal(cloud.Token)
	st.Spec.Environment = []string{"platform/base", "team/dev"}
	// The fake does not delete stacks.
	st.Spec.DestroyOnFinalize = false
	s.create(st)

	s.waitReady("esccloud")
	content, err := s.readFile("esc-greeting.txt")
	if err != nil || content != "from team/dev, bye" {
		t.Errorf("esc-greeting.txt = %q, %v; want the environments' values, the later import winning", content, err)
	}
	if opened := cloud.Opened(); len(opened) == 0 || !slices.Equal(opened[0], []string{"platform/base", "team/dev"}) {
		t.Errorf("imports opened = %q; want [platform/base team/dev] first", opened)
	}
	if u := cloud.Unanswered(); len(u) > 0 {
		t.Errorf("the fake did not answer %q", u)
	}
}

// A Secret edited while an up waits for its runner slot is not deployed under the key the
// Stack decided on before the edit: that up fails before the engine runs, and the Stack
// decides again, so the value deployed is the one its recorded key names.
func TestStackReconciler_Reconcile_InputsEditedBeforeTheRunAreDecidedAgain(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	// The namespace's one runner slot (--max-concurrent-updates-per-namespace) is held by
	// a Stack that sleeps, so the next up waits in the queue.
	s.create(s.program("nap", map[string]pulumiv1.Resource{"nap": {
		Type: "stackwright-testing:index:Sleep", Properties: map[string]apiextensionsv1.JSON{"seconds": jsonValue(5)},
	}}, nil))
	s.create(s.stack("holder", "nap"))
	s.eventually(func(g Gomega) {
		ups := s.updates("holder")
		g.Expect(ups).NotTo(BeEmpty())
		g.Expect(ups[0].Status.Phase).To(Equal(v1alpha1.UpdatePhaseRunning))
	})

	prog := s.program("greet", map[string]pulumiv1.Resource{"f": fileResource("greeting.txt", "${greeting}")}, nil)
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"greeting": {Type: "String"}}
	s.create(prog)
	creds := secretOf(s.ns, "creds", map[string]string{"greeting": "before"})
	s.create(creds)
	st := s.stack("greeter", "greet")
	st.Spec.SecretsRef = map[string]pulumiv1.ResourceRef{"greeting": secretRefOf("creds", "greeting")}
	s.create(st)
	var decided v1alpha1.Update
	s.eventually(func(g Gomega) {
		ups := s.updates("greeter")
		g.Expect(ups).To(HaveLen(1))
		decided = ups[0]
	})
	s.g.Expect(decided.Status.Phase).To(BeEmpty(), "the up did not wait for the slot")
	s.patch(creds, func() { creds.StringData = map[string]string{"greeting": "after"} })

	st = s.waitReady("greeter")
	s.eventually(func(g Gomega) {
		g.Expect(s.kube.Get(&decided)).To(Succeed())
		g.Expect(decided.Status.Phase).To(Equal(v1alpha1.UpdatePhaseFailed))
	})
	c := apimeta.FindStatusCondition(decided.Status.Conditions, v1alpha1.ConditionComplete)
	s.g.Expect(c).NotTo(BeNil())
	s.g.Expect(c.Reason).To(Equal(v1alpha1.ReasonTransientFailure))
	s.g.Expect(c.Message).To(ContainSubstring("a ConfigMap or Secret the Stack references changed before this up ran"))
	content, err := s.readFile("greeting.txt")
	s.g.Expect(err).NotTo(HaveOccurred())
	s.g.Expect(content).To(Equal("after"))
	// Every up that succeeded ran on the inputs its key was computed from: the one key
	// that deployed is the Stack's last successful one, not the one decided before the edit.
	var succeeded []string
	for _, u := range s.updates("greeter") {
		if u.Status.Phase == v1alpha1.UpdatePhaseSucceeded {
			succeeded = append(succeeded, u.Spec.DesiredStateKey)
		}
	}
	s.g.Expect(succeeded).To(ConsistOf(st.Status.Stackwright.LastSuccessfulKey))
	s.g.Expect(succeeded).NotTo(ContainElement(decided.Spec.DesiredStateKey))
}
