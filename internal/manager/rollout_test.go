package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// waitAt waits until each named Stack is Ready with revision deployed.
func waitAt(t *testing.T, ns, revision string, names ...string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		for _, n := range names {
			st := &pulumiv1.Stack{}
			g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: n}, st)).To(Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "Stack %s: %v", n, st.Status.Conditions)
			g.Expect(st.Status.LastUpdate).NotTo(BeNil())
			g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal(revision), "Stack %s", n)
		}
	}).WithTimeout(4*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "%v at %s", names, revision)
}

// getRollout reads the rollout.
func getRollout(g Gomega, ro *v1alpha1.StackRollout) *v1alpha1.StackRollout {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
	return ro
}

// firstUpStart is when the first up of the Stacks at revision was created.
func firstUpStart(g Gomega, ns, revision string, names ...string) time.Time {
	var list v1alpha1.UpdateList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var first time.Time
	in := map[string]bool{}
	for _, n := range names {
		in[n] = true
	}
	for _, u := range list.Items {
		if in[u.Spec.StackName] && u.Spec.Revision == revision && u.Spec.Type == v1alpha1.UpdateTypeUp &&
			(first.IsZero() || u.CreationTimestamp.Time.Before(first)) {
			first = u.CreationTimestamp.Time
		}
	}
	return first
}

// The StackRollout controller is registered and works with the real Stack controller: the
// Stacks report the revision their Program offers, a new one reaches ring 1 only after
// ring 0 deployed it and baked, and the rollout ends with it as its stable revision. The
// rollout's behaviour (gates, halt, abort, resume, promotion) is tested in
// internal/controller/rollout.
func TestManager_StackRollout_WavesWithTheStackController(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	startManager(t, env.Config, testOptions(t))
	ns := env.Namespace(t)
	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"version": {Raw: []byte(`"v1"`)}}
	g.Expect(env.Client.Create(ctx, prog)).To(Succeed())
	for ring, n := range []string{"r0", "r1"} {
		g.Expect(env.Client.Create(ctx, &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n, Labels: map[string]string{"app": "fleet", "ring": []string{"0", "1"}[ring]}},
			Spec:       pulumiv1.StackSpec{Stack: n, ProgramRef: &pulumiv1.ProgramReference{Name: "shared"}},
		})).To(Succeed())
	}
	waitAt(t, ns, "generation/1", "r0", "r1")

	const bake = 2 * time.Second
	ro := &v1alpha1.StackRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: v1alpha1.StackRolloutSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "fleet"}},
			Waves:    v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1"}}},
			BakeTime: &metav1.Duration{Duration: bake},
		},
	}
	g.Expect(env.Client.Create(ctx, ro)).To(Succeed())
	g.Eventually(func(g Gomega) {
		getRollout(g, ro)
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutIdle))
		g.Expect(ro.Status.Stable).NotTo(BeNil())
		g.Expect(ro.Status.Stable.Revision).To(Equal("generation/1"))
		g.Expect(apimeta.IsStatusConditionTrue(ro.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "%v", ro.Status.Conditions)
	}).WithTimeout(3*time.Minute).Should(Succeed(), "a new rollout takes the deployed revision as stable")

	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(prog), prog); err != nil {
			return err
		}
		prog.Program.Outputs["version"] = apiextensionsv1.JSON{Raw: []byte(`"v2"`)}
		return env.Client.Update(ctx, prog)
	}).Should(Succeed())
	waitAt(t, ns, "generation/2", "r0", "r1")
	g.Eventually(func(g Gomega) {
		getRollout(g, ro)
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutIdle))
		g.Expect(ro.Status.Stable.Revision).To(Equal("generation/2"))
		g.Expect(ro.Status.Target).To(BeNil())
	}).WithTimeout(3*time.Minute).Should(Succeed(), "the rollout completes")
	ring0Ready := ro.Status.Waves[0].ReadyTime.Time
	g.Expect(firstUpStart(g, ns, "generation/2", "r1")).To(BeTemporally(">=", ring0Ready.Add(bake).Truncate(time.Second)), "ring 1 starts after ring 0 baked")
}

// programFleet creates, in a new namespace, the Program shared and one Stack of it per
// name in rings (labelled app=fleet and ring=<index>), and waits until each deployed
// generation/1.
func programFleet(t *testing.T, rings ...[]string) (string, *pulumiv1.Program) {
	t.Helper()
	g := NewWithT(t)
	ns := env.Namespace(t)
	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"version": {Raw: []byte(`"v1"`)}}
	g.Expect(env.Client.Create(t.Context(), prog)).To(Succeed())
	var all []string
	for ring, names := range rings {
		for _, n := range names {
			g.Expect(env.Client.Create(t.Context(), &pulumiv1.Stack{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n, Labels: map[string]string{"app": "fleet", "ring": fmt.Sprint(ring)}},
				Spec:       pulumiv1.StackSpec{Stack: n, ProgramRef: &pulumiv1.ProgramReference{Name: "shared"}},
			})).To(Succeed())
			all = append(all, n)
		}
	}
	waitAt(t, ns, "generation/1", all...)
	return ns, prog
}

// setVersion changes the Program's output, which makes its next generation a new revision,
// and returns that revision.
func setVersion(t *testing.T, prog *pulumiv1.Program, version string) string {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(prog), prog); err != nil {
			return err
		}
		prog.Program.Outputs["version"] = apiextensionsv1.JSON{Raw: fmt.Appendf(nil, "%q", version)}
		return env.Client.Update(t.Context(), prog)
	}).Should(Succeed())
	return fmt.Sprintf("generation/%d", prog.Generation)
}

// upsOf lists the revisions of the ups of each named Stack, in the order created.
func upsOf(g Gomega, ns string, names ...string) map[string][]string {
	var list v1alpha1.UpdateList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) ||
			(list.Items[i].CreationTimestamp.Equal(&list.Items[j].CreationTimestamp) && list.Items[i].Name < list.Items[j].Name)
	})
	out := map[string][]string{}
	for _, u := range list.Items {
		if slices.Contains(names, u.Spec.StackName) && u.Spec.Type == v1alpha1.UpdateTypeUp {
			out[u.Spec.StackName] = append(out[u.Spec.StackName], u.Spec.Revision)
		}
	}
	return out
}

// newRollout creates the rollout fleet of spec in ns, selecting app=fleet in waves by ring
// (spec's pace kept),
// and waits until it is Idle at generation/1.
func newRollout(t *testing.T, ns string, rings int, spec v1alpha1.StackRolloutSpec) *v1alpha1.StackRollout {
	t.Helper()
	g := NewWithT(t)
	spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "fleet"}}
	values := make([]string, rings)
	for i := range values {
		values[i] = fmt.Sprint(i)
	}
	spec.Waves.ByLabel = &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: values}
	ro := &v1alpha1.StackRollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"}, Spec: spec}
	g.Expect(env.Client.Create(t.Context(), ro)).To(Succeed())
	g.Eventually(func(g Gomega) {
		getRollout(g, ro)
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutIdle))
		g.Expect(ro.Status.Stable).NotTo(BeNil())
		g.Expect(ro.Status.Stable.Revision).To(Equal("generation/1"))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	return ro
}

// annotateRollout sets a request annotation of the rollout to a new value.
func annotateRollout(t *testing.T, ro *v1alpha1.StackRollout, key string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, time.Now().UTC().Format(time.RFC3339Nano))
	NewWithT(t).Expect(env.Client.Patch(t.Context(), ro, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

// A paused rollout, with the whole manager and the real engine, runs no up of a new
// revision however long it stays paused (sampled), and rolls it out once resumed.
func TestManager_StackRollout_PauseHoldsNewUpdates(t *testing.T) {
	g := NewWithT(t)
	startManager(t, env.Config, testOptions(t))
	ns, prog := programFleet(t, []string{"r0"}, []string{"r1"})
	ro := newRollout(t, ns, 2, v1alpha1.StackRolloutSpec{})

	annotateRollout(t, ro, v1alpha1.RolloutPauseAnnotation)
	g.Eventually(func(g Gomega) {
		g.Expect(apimeta.IsStatusConditionTrue(getRollout(g, ro).Status.Conditions, v1alpha1.ConditionPaused)).To(BeTrue())
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	v2 := setVersion(t, prog, "v2")
	g.Eventually(func(g Gomega) {
		c := apimeta.FindStatusCondition(getRollout(g, ro).Status.Conditions, pulumiv1.ConditionReconciling)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha1.ReasonRolloutPaused))
		g.Expect(c.Message).To(ContainSubstring(v2))
	}).WithTimeout(3*time.Minute).Should(Succeed(), "the Stacks offer the new revision, and the paused rollout does not start it")
	g.Consistently(func(g Gomega) {
		for n, revs := range upsOf(g, ns, "r0", "r1") {
			g.Expect(revs).NotTo(ContainElement(v2), "Stack %s ran an up of %s while the rollout was paused", n, v2)
		}
	}).WithTimeout(5 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

	annotateRollout(t, ro, v1alpha1.RolloutResumeAnnotation)
	waitAt(t, ns, v2, "r0", "r1")
}

// sampleUps counts, until the returned function is called, the unfinished ups of revision
// (Pending or Running) of each wave's Stacks, and returns the most seen at once per wave.
func sampleUps(t *testing.T, ns, revision string, waves map[string][]string) (stop func() map[string]int) {
	ctx, cancel := context.WithCancel(t.Context())
	most := map[string]int{}
	done := make(chan struct{})
	waveOf := map[string]string{}
	for w, names := range waves {
		for _, n := range names {
			waveOf[n] = w
		}
	}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var list v1alpha1.UpdateList
			if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err == nil {
				now := map[string]int{}
				for _, u := range list.Items {
					w, ok := waveOf[u.Spec.StackName]
					if ok && u.Spec.Revision == revision && u.Spec.Type == v1alpha1.UpdateTypeUp &&
						u.Status.Phase != v1alpha1.UpdatePhaseSucceeded && u.Status.Phase != v1alpha1.UpdatePhaseFailed {
						now[w]++
					}
				}
				for w, n := range now {
					most[w] = max(most[w], n)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() map[string]int { cancel(); <-done; return most }
}

// Each wave's maxParallel, with the whole manager and the real engine: the rollout lets a
// wave of four run all its ups at once, and spec.waves.pace bounds its next wave to 50%
// (sampled: never more than two unfinished ups of the new revision in that wave).
func TestManager_StackRollout_PerWaveMaxParallel(t *testing.T) {
	startManager(t, env.Config, testOptions(t))
	waves := map[string][]string{"0": {"r0-a", "r0-b", "r0-c", "r0-d"}, "1": {"r1-a", "r1-b", "r1-c", "r1-d"}}
	ns, prog := programFleet(t, waves["0"], waves["1"])
	newRollout(t, ns, 2, v1alpha1.StackRolloutSpec{Waves: v1alpha1.RolloutWaves{Pace: []v1alpha1.RolloutWavePace{
		{Wave: "1", MaxParallel: new(intstr.FromString("50%"))},
	}}})

	stop := sampleUps(t, ns, "generation/2", waves)
	v2 := setVersion(t, prog, "v2")
	NewWithT(t).Expect(v2).To(Equal("generation/2"))
	waitAt(t, ns, v2, append(waves["0"], waves["1"]...)...)
	most := stop()
	t.Logf("most unfinished ups of %s at once, per wave: %v", v2, most)
	NewWithT(t).Expect(most["1"]).To(And(BeNumerically(">=", 1), BeNumerically("<=", 2)), "wave 1 runs at most 50%% of its 4 Stacks at once")
}

// Three revisions pushed while one is rolled out, with the whole manager and the real
// engine and newerRevision: Restart: the rollout restarts with the newest from the first
// wave, and the later waves only ever run ups of the stable revision and of the newest.
func TestManager_StackRollout_NewerRevisionsSkipTheLaterWaves(t *testing.T) {
	g := NewWithT(t)
	startManager(t, env.Config, testOptions(t))
	ns, prog := programFleet(t, []string{"r0"}, []string{"r1"}, []string{"r2"})
	ro := newRollout(t, ns, 3, v1alpha1.StackRolloutSpec{
		NewerRevision: v1alpha1.RolloutNewerRevisionRestart,
		Gates:         v1alpha1.RolloutGates{Approval: v1alpha1.RolloutApprovalManual},
	})
	awaiting := func(target string) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			getRollout(g, ro)
			g.Expect(ro.Status.Target).NotTo(BeNil())
			g.Expect(ro.Status.Target.Revision).To(Equal(target))
			g.Expect(ro.Status.Waves[ro.Status.Wave].State).To(Equal(v1alpha1.WaveAwaitingPromotion))
		}).WithTimeout(3*time.Minute).Should(Succeed(), "%s awaits promotion", target)
	}

	v2 := setVersion(t, prog, "v2")
	awaiting(v2)
	var newest string
	for _, v := range []string{"v3", "v4", "v5"} {
		newest = setVersion(t, prog, v)
	}
	awaiting(newest)
	g.Expect(ro.Status.Wave).To(Equal(int32(0)), "the newest restarted from the first wave")
	annotateRollout(t, ro, v1alpha1.RolloutPromoteAnnotation)
	g.Eventually(func(g Gomega) { g.Expect(getRollout(g, ro).Status.Wave).To(Equal(int32(1))) }).WithTimeout(3 * time.Minute).Should(Succeed())
	awaiting(newest)
	annotateRollout(t, ro, v1alpha1.RolloutPromoteAnnotation)
	waitAt(t, ns, newest, "r0", "r1", "r2")
	ups := upsOf(g, ns, "r1", "r2")
	g.Expect(ups).To(Equal(map[string][]string{"r1": {"generation/1", newest}, "r2": {"generation/1", newest}}),
		"the later waves run no revision between the stable one and the newest")
}

// An automatic abort, with the whole manager and the real engine: a revision whose program
// fails halts wave 0, which the rollout aborts at once, running a new up of the stable
// revision there while wave 1 never runs the failed one; the next failing revision is one
// abort beyond spec.autoAbort.limit and leaves the rollout halted for a person.
func TestManager_StackRollout_AutoAbortReturnsToStableUpToItsLimit(t *testing.T) {
	g := NewWithT(t)
	startManager(t, env.Config, testOptions(t))
	ns, prog := programFleet(t, []string{"r0"}, []string{"r1"})
	ro := newRollout(t, ns, 2, v1alpha1.StackRolloutSpec{AutoAbort: &v1alpha1.RolloutAutoAbort{Limit: 1}})

	broken := setVersion(t, prog, "${missing}")
	g.Eventually(func(g Gomega) {
		getRollout(g, ro)
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutAborted))
		g.Expect(ro.Status.Aborted).NotTo(BeNil())
		g.Expect(ro.Status.Aborted.Revision).To(Equal(broken))
		c := apimeta.FindStatusCondition(ro.Status.Conditions, pulumiv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha1.ReasonRolloutAborted), "%v", ro.Status.Conditions)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(3*time.Minute).Should(Succeed(), "the failed revision is aborted and wave 0 is back at the stable revision")
	g.Expect(ro.Status.AutomaticAborts).To(Equal(int32(1)))
	waitAt(t, ns, "generation/1", "r0", "r1")
	g.Expect(upsOf(g, ns, "r0", "r1")).To(Equal(map[string][]string{"r0": {"generation/1", broken, "generation/1"}, "r1": {"generation/1"}}),
		"wave 0 runs a new up of the stable revision; wave 1 never runs the failed one")

	again := setVersion(t, prog, "${missing-too}")
	g.Eventually(func(g Gomega) {
		getRollout(g, ro)
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutHalted))
		g.Expect(ro.Status.Target.Revision).To(Equal(again))
		c := apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("not aborted automatically"))
	}).WithTimeout(3*time.Minute).Should(Succeed(), "beyond its limit, the automatic abort leaves the halt to a person")
}

// kubeconfig is a kubeconfig for the test's API server, for the Kubernetes provider.
func kubeconfig(t *testing.T) string {
	t.Helper()
	c := env.Config
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	cfg.CurrentContext = "envtest"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// configMaps is a program of the real Kubernetes provider making one ConfigMap per name in
// ns, each named <stack>-<name>.
func configMaps(t *testing.T, ns string, names ...string) pulumiv1.ProgramSpec {
	t.Helper()
	js := func(v any) apiextensionsv1.JSON {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return apiextensionsv1.JSON{Raw: b}
	}
	spec := pulumiv1.ProgramSpec{Resources: map[string]pulumiv1.Resource{
		"k8s": {Type: "pulumi:providers:kubernetes", Properties: map[string]apiextensionsv1.JSON{"kubeconfig": js(kubeconfig(t))}},
	}}
	for _, n := range names {
		spec.Resources[n] = pulumiv1.Resource{
			Type: "kubernetes:core/v1:ConfigMap",
			Properties: map[string]apiextensionsv1.JSON{
				"metadata": js(map[string]string{"name": "${pulumi.stack}-" + n, "namespace": ns}),
				"data":     js(map[string]string{"name": n}),
			},
			Options: &pulumiv1.ResourceOptions{Provider: &apiextensionsv1.JSON{Raw: []byte(`"${k8s}"`)}},
		}
	}
	return spec
}

// The preview gate, with the whole manager and the real engine and Kubernetes provider: a
// revision that deletes a ConfigMap halts the rollout before wave 0 deploys it, naming the
// Stack and the resource; nothing runs an up of it, and the ConfigMap stays.
func TestManager_StackRollout_PreviewGateHaltsADelete(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	startManager(t, env.Config, testOptions(t))
	ns := env.Namespace(t)
	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"}, Program: configMaps(t, ns, "keep", "old")}
	g.Expect(env.Client.Create(ctx, prog)).To(Succeed())
	for ring, n := range []string{"r0", "r1"} {
		g.Expect(env.Client.Create(ctx, &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n, Labels: map[string]string{"app": "fleet", "ring": fmt.Sprint(ring)}},
			Spec:       pulumiv1.StackSpec{Stack: n, ProgramRef: &pulumiv1.ProgramReference{Name: "shared"}},
		})).To(Succeed())
	}
	waitAt(t, ns, "generation/1", "r0", "r1")
	ro := newRollout(t, ns, 2, v1alpha1.StackRolloutSpec{Gates: v1alpha1.RolloutGates{Preview: &v1alpha1.RolloutPreviewGate{NoDeletes: true}}})

	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(prog), prog); err != nil {
			return err
		}
		prog.Program = configMaps(t, ns, "keep")
		return env.Client.Update(ctx, prog)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		getRollout(g, ro)
		c := apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted)
		g.Expect(c).NotTo(BeNil(), "%v", ro.Status.Conditions)
		g.Expect(c.Reason).To(Equal(v1alpha1.ReasonPreviewGateFailed))
		g.Expect(c.Message).To(ContainSubstring("Stack r0: preview Update"))
		g.Expect(c.Message).To(MatchRegexp(`deletes 1 resource\(s\): urn:pulumi:r0::[^:]+::kubernetes:core/v1:ConfigMap::old`))
	}).WithTimeout(3*time.Minute).Should(Succeed(), "the preview gate halts the revision that deletes a ConfigMap")
	g.Expect(ro.Status.FailedStacks).To(Equal([]string{"r0"}))
	g.Expect(upsOf(g, ns, "r0", "r1")).To(Equal(map[string][]string{"r0": {"generation/1"}, "r1": {"generation/1"}}), "no up of the halted revision")
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "r0-old"}, &corev1.ConfigMap{})).To(Succeed(), "the ConfigMap stays")
}
