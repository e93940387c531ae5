package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

// A StackRollout of a template's revisions, with the whole manager and a real engine: three
// tenants' instances (one ring per tenant namespace) move to a new template revision ring by
// ring, each ring behind a promotion, although the template's strategy alone would move
// them at once; a revision whose program fails halts the rollout in ring 0 while rings 1
// and 2 keep their revision, and the abort renders ring 0 from the stable revision again.
// The rollout's own behaviour is tested in internal/controller/rollout, the instance
// controller's choice of revision in internal/controller/instance.
func TestManager_StackRollout_TemplateRevisionsInWaves(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	group := fmt.Sprintf("r%d.test.stackwright.dev", rand.Uint32())
	opts := testOptions(t)
	opts.TemplateAPIGroups = []string{group}
	startManager(t, env.Config, opts)
	platform := env.Namespace(t)
	tenants := []string{env.Namespace(t), env.Namespace(t), env.Namespace(t)}

	for name, version := range map[string]string{"bucket-v1": `"v1"`, "bucket-v2": `"v2"`, "bucket-broken": `"${missing}"`} {
		prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: platform}}
		prog.Program.Outputs = map[string]apiextensionsv1.JSON{"version": {Raw: []byte(version)}}
		g.Expect(env.Client.Create(ctx, prog)).To(Succeed())
	}
	tmpl := &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "buckets-" + strings.Split(group, ".")[0]},
		Spec: v1alpha1.StackTemplateSpec{
			API:       v1alpha1.TemplateAPI{Group: group, Kind: "Bucket", Plural: "buckets"},
			Namespace: platform,
			Stack:     apiextensionsv1.JSON{Raw: []byte(`{"stack":"buckets","programRef":{"name":"bucket-v1"}}`)},
			Outputs:   []string{"version"},
		},
	}
	g.Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tmpl) })
	for _, ns := range tenants {
		inst := &unstructured.Unstructured{}
		g.Expect(json.Unmarshal(fmt.Appendf(nil, `{"apiVersion":"%s/v1alpha1","kind":"Bucket","metadata":{"namespace":%q,"name":"data"},"spec":{}}`, group, ns), &inst.Object)).To(Succeed())
		g.Eventually(func() error { return env.Client.Create(ctx, inst) }).WithTimeout(2*time.Minute).Should(Succeed(), "the kind is served")
	}
	// at waits until the Stack of each named ring is rendered from revision and Ready with
	// the program's version output.
	at := func(why, revision, version string, rings ...int) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			for _, ring := range rings {
				st := ringStack(g, platform, tmpl.Name, tenants[ring])
				g.Expect(st.Labels).To(HaveKeyWithValue(v1alpha1.TemplateRevisionLabel, revision), "ring %d", ring)
				g.Expect(apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "ring %d: %v", ring, st.Status.Conditions)
				g.Expect(st.Status.ObservedGeneration).To(Equal(st.Generation), "ring %d", ring)
				g.Expect(string(st.Status.Outputs["version"].Raw)).To(Equal(`"`+version+`"`), "ring %d", ring)
			}
		}).WithTimeout(4*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), why)
	}
	at("every instance is deployed at revision 1", "1", "v1", 0, 1, 2)

	ro := &v1alpha1.StackRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "buckets"},
		Spec: v1alpha1.StackRolloutSpec{
			Template: &v1alpha1.RolloutTemplate{Name: tmpl.Name},
			Waves:    v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: v1alpha1.InstanceNamespaceLabel, Values: tenants}},
			Gates:    v1alpha1.RolloutGates{Approval: v1alpha1.RolloutApprovalManual},
		},
	}
	g.Expect(env.Client.Create(ctx, ro)).To(Succeed())
	rolloutIs := func(why string, check func(g Gomega, ro *v1alpha1.StackRollout)) {
		t.Helper()
		g.Eventually(func(g Gomega) { check(g, getRollout(g, ro)) }).WithTimeout(4*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), why)
	}
	rolloutIs("a new rollout takes the revision deployed as stable", func(g Gomega, ro *v1alpha1.StackRollout) {
		g.Expect(ro.Status.Stable).To(HaveField("Revision", "1"))
		g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, pulumiv1.ConditionReady)).To(HaveField("Reason", v1alpha1.ReasonRolledOut))
	})
	useProgram := func(name string) {
		t.Helper()
		g.Eventually(func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl); err != nil {
				return err
			}
			tmpl.Spec.Stack = apiextensionsv1.JSON{Raw: fmt.Appendf(nil, `{"stack":"buckets","programRef":{"name":%q}}`, name)}
			return env.Client.Update(ctx, tmpl)
		}).Should(Succeed())
	}
	awaiting := func(wave int32) func(g Gomega, ro *v1alpha1.StackRollout) {
		return func(g Gomega, ro *v1alpha1.StackRollout) {
			g.Expect(ro.Status.Wave).To(Equal(wave))
			g.Expect(ro.Status.Waves[wave].State).To(Equal(v1alpha1.WaveAwaitingPromotion))
		}
	}
	promote := func() {
		t.Helper()
		g.Eventually(func() error {
			getRollout(g, ro)
			ro.Annotations = map[string]string{v1alpha1.RolloutPromoteAnnotation: time.Now().UTC().Format(time.RFC3339Nano)}
			return env.Client.Update(ctx, ro)
		}).Should(Succeed())
	}

	// Revision 2 goes ring by ring: each later ring keeps revision 1 until promoted.
	useProgram("bucket-v2")
	at("revision 2 reaches ring 0", "2", "v2", 0)
	rolloutIs("ring 0 awaits its promotion", awaiting(0))
	at("rings 1 and 2 keep revision 1 while ring 0 awaits its promotion", "1", "v1", 1, 2)
	promote()
	at("revision 2 reaches ring 1 once promoted", "2", "v2", 1)
	rolloutIs("ring 1 awaits its promotion", awaiting(1))
	at("ring 2 keeps revision 1 while ring 1 awaits its promotion", "1", "v1", 2)
	promote()
	at("revision 2 reaches ring 2 once promoted", "2", "v2", 2)
	rolloutIs("revision 2 becomes stable", func(g Gomega, ro *v1alpha1.StackRollout) {
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutIdle))
		g.Expect(ro.Status.Stable).To(HaveField("Revision", "2"))
	})

	// Revision 3's program fails: the rollout halts in ring 0; the later rings keep 2.
	useProgram("bucket-broken")
	var failed string
	rolloutIs("the failing revision halts the rollout in ring 0", func(g Gomega, ro *v1alpha1.StackRollout) {
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutHalted))
		g.Expect(ro.Status.Target).To(HaveField("Revision", "3"))
		g.Expect(ro.Status.WaveName).To(Equal(tenants[0]))
		g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted)).To(HaveField("Reason", BeElementOf(v1alpha1.ReasonStackUpdateFailed, v1alpha1.ReasonStackStalled)))
		g.Expect(ro.Status.FailedStacks).To(HaveLen(1))
		failed = ro.Status.FailedStacks[0]
	})
	g.Expect(failed).To(Equal(ringStack(g, platform, tmpl.Name, tenants[0]).Name))
	at("rings 1 and 2 keep revision 2 while the rollout is halted", "2", "v2", 1, 2)

	// The abort renders ring 0 from revision 2 again.
	g.Eventually(func() error {
		getRollout(g, ro)
		ro.Annotations = map[string]string{v1alpha1.RolloutAbortAnnotation: time.Now().UTC().Format(time.RFC3339Nano)}
		return env.Client.Update(ctx, ro)
	}).Should(Succeed())
	at("the abort returns ring 0 to revision 2", "2", "v2", 0, 1, 2)
	rolloutIs("the rollout is rolled back", func(g Gomega, ro *v1alpha1.StackRollout) {
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutAborted))
		g.Expect(ro.Status.Aborted).To(HaveField("Revision", "3"))
		g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, pulumiv1.ConditionReady)).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", v1alpha1.ReasonRolloutAborted)))
	})
}

// ringStack reads the Stack of template's instance in tenant's namespace.
func ringStack(g Gomega, platform, template, tenant string) *pulumiv1.Stack {
	var list pulumiv1.StackList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(platform),
		client.MatchingLabels{v1alpha1.TemplateLabel: template, v1alpha1.InstanceNamespaceLabel: tenant})).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1), "the Stack of the instance in %s", tenant)
	return &list.Items[0]
}

// The preview gate of a StackRollout of a template's revisions, with the whole manager and
// the real engine: each instance's Stack previews the new revision before its wave opens. A
// revision that only adds a file passes, wave by wave, each Stack's up held to the plan its
// preview saved; a revision that deletes a file halts the rollout in ring 0 naming the Stack
// and the resource, before any Stack runs an up of it: ring 0's Stack stays rendered from it
// for its preview only (holding revision 2), ring 1 never previews, the files stay, and the
// abort renders ring 0 from revision 2 again. The revisions are directories of one git
// repository, so that they are one Pulumi project (a Program's name is its project's).
func TestManager_StackRollout_TemplatePreviewGateHaltsADelete(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	group := fmt.Sprintf("p%d.test.stackwright.dev", rand.Uint32())
	opts := testOptions(t)
	opts.TemplateAPIGroups = []string{group}
	startManager(t, env.Config, opts)
	platform := env.Namespace(t)
	tenants := []string{env.Namespace(t), env.Namespace(t)}

	project := func(files ...string) string {
		var b strings.Builder
		b.WriteString("name: files\nruntime: yaml\nresources:\n")
		for _, f := range files {
			fmt.Fprintf(&b, "  %s:\n    type: stackwright-testing:index:File\n    properties:\n      path: ${pulumi.stack}-%s.txt\n      content: %s\n", f, f, f)
		}
		return b.String()
	}
	served, root := t.TempDir(), t.TempDir()
	gitserver.NewRepo(t, served, "files", map[string]string{
		"v1/Pulumi.yaml": project("keep", "old"), "v2/Pulumi.yaml": project("keep", "old", "added"), "v3/Pulumi.yaml": project("keep", "added"),
	})
	server := gitserver.NewHTTPServer(t, served, nil)
	stackSpec := func(dir string) apiextensionsv1.JSON {
		b, err := json.Marshal(map[string]any{
			"stack": "files", "projectRepo": server.URL + "/files.git", "branch": "main", "repoDir": dir,
			"envRefs": map[string]any{"STACKWRIGHT_TESTING_ROOT": literalRef(root)},
		})
		g.Expect(err).NotTo(HaveOccurred())
		return apiextensionsv1.JSON{Raw: b}
	}
	tmpl := &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "files-" + strings.Split(group, ".")[0]},
		Spec: v1alpha1.StackTemplateSpec{
			API:       v1alpha1.TemplateAPI{Group: group, Kind: "Files", Plural: "files"},
			Namespace: platform,
			Stack:     stackSpec("v1"),
		},
	}
	g.Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tmpl) })
	for _, ns := range tenants {
		inst := &unstructured.Unstructured{}
		g.Expect(json.Unmarshal(fmt.Appendf(nil, `{"apiVersion":"%s/v1alpha1","kind":"Files","metadata":{"namespace":%q,"name":"data"},"spec":{}}`, group, ns), &inst.Object)).To(Succeed())
		g.Eventually(func() error { return env.Client.Create(ctx, inst) }).WithTimeout(2*time.Minute).Should(Succeed(), "the kind is served")
	}
	// at waits until the Stack of each named ring is rendered from revision, with no
	// preview pending, and Ready for that spec.
	at := func(why, revision string, rings ...int) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			for _, ring := range rings {
				st := ringStack(g, platform, tmpl.Name, tenants[ring])
				g.Expect(st.Labels).To(HaveKeyWithValue(v1alpha1.TemplateRevisionLabel, revision), "ring %d", ring)
				g.Expect(st.Annotations).NotTo(HaveKeyWithValue(v1alpha1.RolloutPreviewAnnotation, v1alpha1.RolloutPreviewOnly), "ring %d", ring)
				g.Expect(apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "ring %d: %v", ring, st.Status.Conditions)
				g.Expect(st.Status.ObservedGeneration).To(Equal(st.Generation), "ring %d", ring)
			}
		}).WithTimeout(4*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), why)
	}
	at("every instance is deployed at revision 1", "1", 0, 1)
	var stacks, pulumiStacks []string
	for _, ns := range tenants {
		st := ringStack(g, platform, tmpl.Name, ns)
		stacks, pulumiStacks = append(stacks, st.Name), append(pulumiStacks, st.Spec.Stack)
	}

	ro := &v1alpha1.StackRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "files"},
		Spec: v1alpha1.StackRolloutSpec{
			Template: &v1alpha1.RolloutTemplate{Name: tmpl.Name},
			Waves:    v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: v1alpha1.InstanceNamespaceLabel, Values: tenants}},
			Gates:    v1alpha1.RolloutGates{Preview: &v1alpha1.RolloutPreviewGate{NoDeletes: true}},
		},
	}
	g.Expect(env.Client.Create(ctx, ro)).To(Succeed())
	rolloutIs := func(why string, check func(g Gomega, ro *v1alpha1.StackRollout)) {
		t.Helper()
		g.Eventually(func(g Gomega) { check(g, getRollout(g, ro)) }).WithTimeout(4*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), why)
	}
	stable := func(revision string) func(g Gomega, ro *v1alpha1.StackRollout) {
		return func(g Gomega, ro *v1alpha1.StackRollout) {
			g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutIdle))
			g.Expect(ro.Status.Stable).To(HaveField("Revision", revision))
			g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, pulumiv1.ConditionReady)).To(HaveField("Reason", v1alpha1.ReasonRolledOut))
		}
	}
	rolloutIs("a new rollout takes the revision deployed as stable", stable("1"))
	useDir := func(dir string) {
		t.Helper()
		g.Eventually(func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl); err != nil {
				return err
			}
			tmpl.Spec.Stack = stackSpec(dir)
			return env.Client.Update(ctx, tmpl)
		}).Should(Succeed())
	}
	exists := func(pulumiStack, file string) error {
		_, err := os.Stat(filepath.Join(root, pulumiStack+"-"+file+".txt"))
		return err
	}

	// Revision 2 adds a file: each wave previews it, passes, and applies that plan.
	useDir("v2")
	at("revision 2 reaches both rings", "2", 0, 1)
	rolloutIs("revision 2 becomes stable", stable("2"))
	updates := updatesOf(g, platform, stacks...)
	for i, n := range stacks {
		ups, previews := updates[n][v1alpha1.UpdateTypeUp], updates[n][v1alpha1.UpdateTypePreview]
		if len(ups) != 2 || len(previews) != 1 {
			t.Fatalf("Stack %s ran ups %v and previews %v; want the ups of revisions 1 and 2 and one preview", n, names(ups), names(previews))
		}
		// The up of the previewed desired state (creation times have a second's grain, so
		// the order of the two ups is not theirs).
		var held []string
		for _, u := range ups {
			if u.Spec.DesiredStateKey == previews[0].Spec.DesiredStateKey && u.Spec.Options != nil && u.Spec.Options.Plan == previews[0].Name {
				held = append(held, u.Name)
			}
		}
		if len(held) != 1 {
			t.Errorf("Stack %s's ups held to the plan of preview %s: %v; want the up of revision 2", n, previews[0].Name, held)
		}
		if err := exists(pulumiStacks[i], "added"); err != nil {
			t.Errorf("revision 2's file: %v", err)
		}
	}

	// Revision 3 deletes a file: ring 0's preview halts the rollout.
	useDir("v3")
	rolloutIs("the preview gate halts revision 3 in ring 0", func(g Gomega, ro *v1alpha1.StackRollout) {
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutHalted))
		g.Expect(ro.Status.Target).To(HaveField("Revision", "3"))
		c := apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted)
		g.Expect(c).NotTo(BeNil(), "%v", ro.Status.Conditions)
		g.Expect(c.Reason).To(Equal(v1alpha1.ReasonPreviewGateFailed))
		g.Expect(c.Message).To(ContainSubstring("Stack " + stacks[0] + ": preview Update "))
		g.Expect(c.Message).To(ContainSubstring(" of 3 deletes 1 resource(s): urn:pulumi:" + pulumiStacks[0] + "::files::stackwright-testing:index:File::old"))
		g.Expect(ro.Status.FailedStacks).To(Equal([]string{stacks[0]}))
	})
	at("ring 1 keeps revision 2 while the rollout is halted", "2", 1)
	st := ringStack(g, platform, tmpl.Name, tenants[0])
	if st.Labels[v1alpha1.TemplateRevisionLabel] != "3" || st.Annotations[v1alpha1.RolloutPreviewAnnotation] != v1alpha1.RolloutPreviewOnly || st.Annotations[v1alpha1.TemplateRevisionHeldAnnotation] != "2" {
		t.Errorf("ring 0's Stack has labels %v and annotations %v; want it rendered from revision 3 to preview it only, holding revision 2", st.Labels, st.Annotations)
	}
	updates = updatesOf(g, platform, stacks...)
	if got := names(updates[stacks[0]][v1alpha1.UpdateTypeUp]); len(got) != 2 {
		t.Errorf("ring 0 ran ups %v; want those of revisions 1 and 2 only", got)
	}
	if got := names(updates[stacks[0]][v1alpha1.UpdateTypePreview]); len(got) != 2 {
		t.Errorf("ring 0 ran previews %v; want those of revisions 2 and 3", got)
	}
	if got := append(names(updates[stacks[1]][v1alpha1.UpdateTypeUp]), names(updates[stacks[1]][v1alpha1.UpdateTypePreview])...); len(got) != 3 {
		t.Errorf("ring 1 ran %v; want the ups of revisions 1 and 2 and the preview of 2 only", got)
	}
	for _, ps := range pulumiStacks {
		if err := exists(ps, "old"); err != nil {
			t.Errorf("the file revision 3 would delete: %v", err)
		}
	}

	// The abort renders ring 0 from revision 2 again; the file stays.
	g.Eventually(func() error {
		getRollout(g, ro)
		ro.Annotations = map[string]string{v1alpha1.RolloutAbortAnnotation: time.Now().UTC().Format(time.RFC3339Nano)}
		return env.Client.Update(ctx, ro)
	}).Should(Succeed())
	at("the abort renders ring 0 from revision 2 again", "2", 0, 1)
	rolloutIs("the rollout is rolled back", func(g Gomega, ro *v1alpha1.StackRollout) {
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutAborted))
		g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, pulumiv1.ConditionReady)).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", v1alpha1.ReasonRolloutAborted)))
	})
	if err := exists(pulumiStacks[0], "old"); err != nil {
		t.Errorf("the file revision 3 would delete, after the abort: %v", err)
	}
}

func names(us []v1alpha1.Update) []string {
	out := make([]string, 0, len(us))
	for _, u := range us {
		out = append(out, u.Name)
	}
	return out
}

// updatesOf lists the Updates of the named Stacks in ns, by Stack and type, oldest first (to
// the second).
func updatesOf(g Gomega, ns string, names ...string) map[string]map[v1alpha1.UpdateType][]v1alpha1.Update {
	var list v1alpha1.UpdateList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) ||
			(list.Items[i].CreationTimestamp.Equal(&list.Items[j].CreationTimestamp) && list.Items[i].Name < list.Items[j].Name)
	})
	out := map[string]map[v1alpha1.UpdateType][]v1alpha1.Update{}
	for _, u := range list.Items {
		if !slices.Contains(names, u.Spec.StackName) {
			continue
		}
		if out[u.Spec.StackName] == nil {
			out[u.Spec.StackName] = map[v1alpha1.UpdateType][]v1alpha1.Update{}
		}
		out[u.Spec.StackName][u.Spec.Type] = append(out[u.Spec.StackName][u.Spec.Type], u)
	}
	return out
}
