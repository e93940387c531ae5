package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

// fileProject is a Pulumi YAML project whose File resource writes <stack>.txt below the
// provider's root.
func fileProject(name, content string) string {
	return fmt.Sprintf("name: %s\nruntime: yaml\nresources:\n  f:\n    type: stackwright-testing:index:File\n    properties:\n      path: ${pulumi.stack}.txt\n      content: %s\n", name, content)
}

// setTemplate is a StackSet template spec (JSON with placeholders) whose provider files go
// below root.
func setTemplate(t *testing.T, spec map[string]any, root string) apiextensionsv1.JSON {
	t.Helper()
	spec["resyncFrequencySeconds"] = 10
	spec["envRefs"] = map[string]any{"STACKWRIGHT_TESTING_ROOT": map[string]any{"type": "Literal", "literal": map[string]any{"value": root}}}
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return apiextensionsv1.JSON{Raw: raw}
}

// setStacks returns the set's Stacks by the element they stand for.
func setStacks(g Gomega, set *v1alpha1.StackSet) map[string]pulumiv1.Stack {
	var list pulumiv1.StackList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(set.Namespace), client.MatchingLabels{v1alpha1.StackSetLabel: set.Name})).To(Succeed())
	out := map[string]pulumiv1.Stack{}
	for _, st := range list.Items {
		out[st.Annotations[v1alpha1.StackSetElementAnnotation]] = st
	}
	return out
}

// waitSetReady waits until the set has exactly the elements want, each with a Ready
// Stack, and the set is Ready.
func waitSetReady(t *testing.T, set *v1alpha1.StackSet, want ...string) map[string]pulumiv1.Stack {
	t.Helper()
	var stacks map[string]pulumiv1.Stack
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(set), set)).To(Succeed())
		stacks = setStacks(g, set)
		got := make([]string, 0, len(stacks))
		for e, st := range stacks {
			got = append(got, e)
			g.Expect(apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "Stack %s: %v", st.Name, st.Status.Conditions)
		}
		g.Expect(got).To(ConsistOf(want))
		g.Expect(apimeta.IsStatusConditionTrue(set.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "set: %v", set.Status.Conditions)
	}).WithTimeout(4*time.Minute).WithPolling(time.Second).Should(Succeed(), "the set reaches %v", want)
	return stacks
}

// One Stack per branch matching feature/*: each deploys its branch; a new branch gets a
// Stack, a deleted one's Stack is destroyed and removed, a branch with characters no
// Kubernetes name has gets a valid stable name, and an unreachable repository removes
// nothing.
func TestManager_StackSet_OneStackPerMatchingBranch(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	startManager(t, env.Config, testOptions(t))
	ns := env.Namespace(t)
	served, root := t.TempDir(), t.TempDir()
	repo, _ := gitserver.NewRepo(t, served, "app", map[string]string{"Pulumi.yaml": fileProject("app", "main")})
	server := gitserver.NewHTTPServer(t, served, nil)
	for _, b := range []string{"feature/a", "feature/b", "fix/x"} {
		repo.Branch(b)
	}
	set := &v1alpha1.StackSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "review"},
		Spec: v1alpha1.StackSetSpec{
			Generator: v1alpha1.StackSetGenerator{GitBranches: &v1alpha1.GitBranchesGenerator{
				GitRepository: v1alpha1.GitRepository{URL: server.URL + "/app.git", Interval: &metav1.Duration{Duration: 10 * time.Second}},
				Include:       []string{"feature/*"},
			}},
			Template: v1alpha1.StackSetTemplate{Spec: setTemplate(t, map[string]any{
				"stack": "{{branchSlug}}", "projectRepo": server.URL + "/app.git", "branch": "{{branch}}",
			}, root)},
			DeletionPolicy: v1alpha1.StackSetDestroy,
		},
	}
	g.Expect(env.Client.Create(ctx, set)).To(Succeed())
	stacks := waitSetReady(t, set, "feature/a", "feature/b")
	g.Expect(stacks["feature/a"].Spec.Branch).To(Equal("feature/a"))
	g.Expect(stacks["feature/a"].Spec.DestroyOnFinalize).To(BeTrue(), "Destroy: the Stacks destroy when deleted")
	g.Expect(filepath.Join(root, "feature-a.txt")).To(BeAnExistingFile())

	weird := "feature/Ünïcode__Name.v2+x"
	repo.Branch("feature/c")
	repo.Branch(weird)
	stacks = waitSetReady(t, set, "feature/a", "feature/b", "feature/c", weird)
	for e, st := range stacks {
		g.Expect(validation.IsDNS1123Subdomain(st.Name)).To(BeEmpty(), "%s: %s", e, st.Name)
		g.Expect(len(st.Name)).To(BeNumerically("<=", validation.LabelValueMaxLength), "%s: %s", e, st.Name)
	}
	weirdName := stacks[weird].Name

	repo.DeleteBranch("feature/a")
	stacks = waitSetReady(t, set, "feature/b", "feature/c", weird)
	g.Expect(stacks[weird].Name).To(Equal(weirdName), "names are stable")
	g.Eventually(func() bool {
		_, err := os.Stat(filepath.Join(root, "feature-a.txt"))
		return os.IsNotExist(err)
	}).WithTimeout(2*time.Minute).Should(BeTrue(), "the deleted branch's stack is destroyed")

	// A hand edit of a generated Stack is put back.
	st := stacks["feature/b"]
	st.Spec.Branch = "main"
	g.Expect(env.Client.Update(ctx, &st)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&st), &st)).To(Succeed())
		g.Expect(st.Spec.Branch).To(Equal("feature/b"))
	}).WithTimeout(time.Minute).Should(Succeed())

	server.Close()
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(set), set)).To(Succeed())
		c := apimeta.FindStatusCondition(set.Status.Conditions, pulumiv1.ConditionReconciling)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(pulumiv1.ReasonSourceUnavailable))
	}).WithTimeout(time.Minute).Should(Succeed(), "an unreachable repository shows on the set")
	g.Expect(setStacks(g, set)).To(HaveLen(3), "and removes nothing")
}

// One Stack per project directory under stacks/: a new directory gets one, a removed one's
// Stack is destroyed.
func TestManager_StackSet_OneStackPerProjectDirectory(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	startManager(t, env.Config, testOptions(t))
	ns := env.Namespace(t)
	served, root := t.TempDir(), t.TempDir()
	files := map[string]string{"README.md": "not a project"}
	for _, d := range []string{"a", "b", "c"} {
		files["stacks/"+d+"/Pulumi.yaml"] = fileProject(d, d)
	}
	repo, _ := gitserver.NewRepo(t, served, "mono", files)
	server := gitserver.NewHTTPServer(t, served, nil)
	set := &v1alpha1.StackSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mono"},
		Spec: v1alpha1.StackSetSpec{
			Generator: v1alpha1.StackSetGenerator{GitDirectories: &v1alpha1.GitDirectoriesGenerator{
				GitRepository: v1alpha1.GitRepository{URL: server.URL + "/mono.git", Interval: &metav1.Duration{Duration: 10 * time.Second}},
				Branch:        "main", Include: []string{"stacks/*"},
			}},
			Template: v1alpha1.StackSetTemplate{Spec: setTemplate(t, map[string]any{
				"stack": "{{pathBase}}", "projectRepo": server.URL + "/mono.git", "branch": "{{branch}}", "repoDir": "{{path}}",
			}, root)},
			DeletionPolicy: v1alpha1.StackSetDestroy,
		},
	}
	g.Expect(env.Client.Create(ctx, set)).To(Succeed())
	waitSetReady(t, set, "stacks/a", "stacks/b", "stacks/c")
	content, err := os.ReadFile(filepath.Join(root, "b.txt"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(content)).To(Equal("b"), "each Stack deploys its own directory")

	repo.Commit(map[string]string{"stacks/d/Pulumi.yaml": fileProject("d", "d"), "stacks/b/Pulumi.yaml": ""})
	waitSetReady(t, set, "stacks/a", "stacks/c", "stacks/d")
	g.Eventually(func() bool {
		_, err := os.Stat(filepath.Join(root, "b.txt"))
		return os.IsNotExist(err)
	}).WithTimeout(2*time.Minute).Should(BeTrue(), "the removed directory's stack is destroyed")
	g.Expect(filepath.Join(root, "d.txt")).To(BeAnExistingFile())
}

// A list that loses more elements at once than maxRemovals allows removes none and says
// why; within the bound, the Orphan policy keeps the removed element's Stack, released
// from the set.
func TestManager_StackSet_RemovalsBeyondTheBoundAreHeld(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	startManager(t, env.Config, testOptions(t))
	ns := env.Namespace(t)
	root := t.TempDir()
	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "env"}}
	prog.Program.Resources = map[string]pulumiv1.Resource{"f": {Type: "stackwright-testing:index:File", Properties: map[string]apiextensionsv1.JSON{
		"path": {Raw: []byte(`"${pulumi.stack}.txt"`)}, "content": {Raw: []byte(`"deployed"`)},
	}}}
	g.Expect(env.Client.Create(ctx, prog)).To(Succeed())
	elements := func(names ...string) []v1alpha1.ListElement {
		out := make([]v1alpha1.ListElement, 0, len(names))
		for _, n := range names {
			out = append(out, v1alpha1.ListElement{Name: n, Values: map[string]string{"tier": "t-" + n}})
		}
		return out
	}
	bound := intstr.FromInt32(1)
	set := &v1alpha1.StackSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "envs"},
		Spec: v1alpha1.StackSetSpec{
			Generator:   v1alpha1.StackSetGenerator{List: &v1alpha1.ListGenerator{Elements: elements("dev", "qa", "stage", "prod")}},
			Template:    v1alpha1.StackSetTemplate{Spec: setTemplate(t, map[string]any{"stack": "{{name}}-{{values.tier}}", "programRef": map[string]any{"name": "env"}}, root)},
			MaxRemovals: &bound,
		},
	}
	g.Expect(env.Client.Create(ctx, set)).To(Succeed())
	stacks := waitSetReady(t, set, "dev", "qa", "stage", "prod")
	g.Expect(stacks["qa"].Spec.Stack).To(Equal("qa-t-qa"))

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(set), set)).To(Succeed())
	set.Spec.Generator.List.Elements = elements("dev")
	g.Expect(env.Client.Update(ctx, set)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(set), set)).To(Succeed())
		c := apimeta.FindStatusCondition(set.Status.Conditions, pulumiv1.ConditionStalled)
		g.Expect(c).NotTo(BeNil(), "conditions: %v", set.Status.Conditions)
		g.Expect(c.Reason).To(Equal(v1alpha1.ReasonRemovalsHeld))
		g.Expect(c.Message).To(ContainSubstring("none is removed"))
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Expect(setStacks(g, set)).To(HaveLen(4), "no Stack is removed beyond the bound")

	set.Spec.Generator.List.Elements = elements("dev", "qa", "stage")
	g.Expect(env.Client.Update(ctx, set)).To(Succeed())
	waitSetReady(t, set, "dev", "qa", "stage")
	orphan := &pulumiv1.Stack{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: stacks["prod"].Name}, orphan)).To(Succeed())
	g.Expect(orphan.OwnerReferences).To(BeEmpty(), "Orphan: the Stack is released from the set")
	g.Expect(orphan.DeletionTimestamp).To(BeNil())
	g.Expect(filepath.Join(root, "prod-t-prod.txt")).To(BeAnExistingFile())

	// Deleting an Orphan set keeps its Stacks.
	g.Expect(env.Client.Delete(ctx, set)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(set), set))
	}).WithTimeout(time.Minute).Should(BeTrue())
	var left pulumiv1.StackList
	g.Expect(env.Client.List(ctx, &left, client.InNamespace(ns))).To(Succeed())
	names := make([]string, 0, len(left.Items))
	for _, st := range left.Items {
		if st.DeletionTimestamp == nil {
			names = append(names, st.Name)
		}
	}
	slices.Sort(names)
	g.Expect(names).To(HaveLen(4))
}
