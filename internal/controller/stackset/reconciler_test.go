package stackset_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

// project is a Pulumi project file: the generators look for one, nothing runs it here.
const project = "name: p\nruntime: yaml\n"

// every10s is the shortest listing interval a git generator takes.
var every10s = &metav1.Duration{Duration: 10 * time.Second}

// One Stack per branch matching feature/*, rendered from the template: a new branch gets a
// Stack, a deleted one's Stack is deleted (Destroy: it destroys its resources), a branch
// with characters no Kubernetes name has gets a valid stable name, a hand edit of a Stack
// is put back, and an unreachable repository removes nothing.
func TestReconciler_Reconcile_OneStackPerMatchingBranch(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	served := t.TempDir()
	repo, _ := gitserver.NewRepo(t, served, "app", map[string]string{"Pulumi.yaml": project})
	server := gitserver.NewHTTPServer(t, served, nil)
	for _, b := range []string{"feature/a", "feature/b", "fix/x"} {
		repo.Branch(b)
	}
	set := &v1alpha1.StackSet{
		ObjectMeta: metav1.ObjectMeta{Name: "review"},
		Spec: v1alpha1.StackSetSpec{
			Generator: v1alpha1.StackSetGenerator{GitBranches: &v1alpha1.GitBranchesGenerator{
				GitRepository: v1alpha1.GitRepository{URL: server.URL + "/app.git", Interval: every10s},
				Include:       []string{"feature/*"},
			}},
			Template: v1alpha1.StackSetTemplate{Spec: template(t, map[string]any{
				"stack": "{{branchSlug}}", "projectRepo": server.URL + "/app.git", "branch": "{{branch}}",
			})},
			DeletionPolicy: v1alpha1.StackSetDestroy,
		},
	}
	s.Create(set)
	stacks := s.waitReady(set, "feature/a", "feature/b")
	a := stacks["feature/a"]
	s.g.Expect(a.Spec.Stack).To(Equal("feature-a"))
	s.g.Expect(a.Spec.Branch).To(Equal("feature/a"))
	s.g.Expect(a.Spec.ProjectRepo).To(Equal(server.URL + "/app.git"))
	s.g.Expect(a.Spec.DestroyOnFinalize).To(BeTrue(), "Destroy: the Stacks destroy when deleted")
	s.g.Expect(metav1.IsControlledBy(&a, set)).To(BeTrue(), "the set owns its Stacks")

	weird := "feature/Ünïcode__Name.v2+x"
	repo.Branch("feature/c")
	repo.Branch(weird)
	stacks = s.waitReady(set, "feature/a", "feature/b", "feature/c", weird)
	for e, st := range stacks {
		s.g.Expect(validation.IsDNS1123Subdomain(st.Name)).To(BeEmpty(), "%s: %s", e, st.Name)
		s.g.Expect(len(st.Name)).To(BeNumerically("<=", validation.LabelValueMaxLength), "%s: %s", e, st.Name)
	}
	weirdName := stacks[weird].Name

	repo.DeleteBranch("feature/a")
	stacks = s.waitReady(set, "feature/b", "feature/c", weird)
	s.g.Expect(stacks[weird].Name).To(Equal(weirdName), "names are stable")
	s.WaitGone(&a)

	// A hand edit of a generated Stack is put back.
	b := stacks["feature/b"]
	s.Patch(&b, func() { b.Spec.Branch = "main" })
	s.Eventually(func(g Gomega) {
		g.Expect(s.Get(&b)).To(Succeed())
		g.Expect(b.Spec.Branch).To(Equal("feature/b"))
	})

	server.Close()
	s.WaitCondition(set, pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonSourceUnavailable)
	s.g.Expect(s.live(s.g, set)).To(HaveLen(3), "an unreachable repository removes nothing")
}

// One Stack per project directory under stacks/, each deploying its own directory at the
// branch: a new directory gets one, a removed one's Stack is deleted, and the set records
// the commit it read the directories at.
func TestReconciler_Reconcile_OneStackPerProjectDirectory(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	served := t.TempDir()
	files := map[string]string{"README.md": "not a project"}
	for _, d := range []string{"a", "b", "c"} {
		files["stacks/"+d+"/Pulumi.yaml"] = project
	}
	repo, first := gitserver.NewRepo(t, served, "mono", files)
	server := gitserver.NewHTTPServer(t, served, nil)
	set := &v1alpha1.StackSet{
		ObjectMeta: metav1.ObjectMeta{Name: "mono"},
		Spec: v1alpha1.StackSetSpec{
			Generator: v1alpha1.StackSetGenerator{GitDirectories: &v1alpha1.GitDirectoriesGenerator{
				GitRepository: v1alpha1.GitRepository{URL: server.URL + "/mono.git", Interval: every10s},
				Branch:        "main", Include: []string{"stacks/*"},
			}},
			Template: v1alpha1.StackSetTemplate{Spec: template(t, map[string]any{
				"stack": "{{pathBase}}", "projectRepo": server.URL + "/mono.git", "branch": "{{branch}}", "repoDir": "{{path}}",
			})},
			DeletionPolicy: v1alpha1.StackSetDestroy,
		},
	}
	s.Create(set)
	stacks := s.waitReady(set, "stacks/a", "stacks/b", "stacks/c")
	b := stacks["stacks/b"]
	s.g.Expect([]string{b.Spec.Stack, b.Spec.Branch, b.Spec.RepoDir}).To(Equal([]string{"b", "main", "stacks/b"}), "each Stack deploys its own directory")
	s.g.Expect(set.Status.Revision).To(Equal(first))

	second := repo.Commit(map[string]string{"stacks/d/Pulumi.yaml": project, "stacks/b/Pulumi.yaml": ""})
	s.waitReady(set, "stacks/a", "stacks/c", "stacks/d")
	s.WaitGone(&b)
	s.g.Expect(set.Status.Revision).To(Equal(second))
}

// A list that loses more elements at once than maxRemovals allows removes none and says
// why; within the bound, the Orphan policy keeps the removed element's Stack, released
// from the set; deleting an Orphan set keeps its Stacks.
func TestReconciler_Reconcile_RemovalsBeyondTheBoundAreHeld(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	set, stacks, held := s.heldSet()
	s.g.Expect(stacks["qa"].Spec.Stack).To(Equal("qa-t-qa"))
	s.g.Expect(stacks["qa"].Spec.DestroyOnFinalize).To(BeFalse(), "Orphan: the Stacks keep their resources")
	s.g.Expect(held.Message).To(ContainSubstring("3 of the set's 4 Stacks lost their element at once, more than spec.maxRemovals (1) allows: none is removed"))
	s.g.Expect(s.live(s.g, set)).To(HaveLen(4), "no Stack is removed beyond the bound")

	s.update(set, func(spec *v1alpha1.StackSetSpec) { spec.Generator.List.Elements = listElements("dev", "qa", "stage") })
	s.waitReady(set, "dev", "qa", "stage")
	orphan := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: stacks["prod"].Name}}
	s.g.Expect(s.Get(orphan)).To(Succeed())
	s.g.Expect(orphan.OwnerReferences).To(BeEmpty(), "Orphan: the Stack is released from the set")
	s.g.Expect(orphan.Labels).NotTo(HaveKey(v1alpha1.StackSetLabel))
	s.g.Expect(orphan.DeletionTimestamp).To(BeNil())

	s.g.Expect(env.Client.Delete(s.t.Context(), set)).To(Succeed())
	s.WaitGone(set)
	var left pulumiv1.StackList
	s.g.Expect(env.Client.List(s.t.Context(), &left, client.InNamespace(s.Namespace))).To(Succeed())
	s.g.Expect(left.Items).To(HaveLen(4))
	for _, st := range left.Items {
		s.g.Expect(st.DeletionTimestamp).To(BeNil(), "Stack %s", st.Name)
		s.g.Expect(st.OwnerReferences).To(BeEmpty(), "Stack %s", st.Name)
	}
}

// A set deleted with the Destroy policy deletes its Stacks (each destroys its resources)
// and keeps its finalizer until they are gone.
func TestReconciler_Reconcile_DestroyWaitsForItsStacks(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	set := s.listSet("envs", "dev", "qa")
	set.Spec.DeletionPolicy = v1alpha1.StackSetDestroy
	s.Create(set)
	stacks := s.waitReady(set, "dev", "qa")
	for _, st := range stacks {
		s.hold(st.Name)
	}

	s.g.Expect(env.Client.Delete(s.t.Context(), set)).To(Succeed())
	s.Eventually(func(g Gomega) {
		got := s.set(g, set)
		c := apimeta.FindStatusCondition(got.Status.Conditions, pulumiv1.ConditionReconciling)
		g.Expect(c).NotTo(BeNil(), "conditions: %v", got.Status.Conditions)
		g.Expect(c.Reason).To(Equal(pulumiv1.ReasonDestroyInProgress))
		g.Expect(c.Message).To(HavePrefix("waiting for 2 Stack(s) to be destroyed and deleted"))
		for e, st := range s.stacks(g, set) {
			g.Expect(st.DeletionTimestamp).NotTo(BeNil(), "Stack of %s is deleted", e)
			g.Expect(st.Spec.DestroyOnFinalize).To(BeTrue(), "Stack of %s destroys its resources", e)
		}
	})
	for _, st := range stacks {
		s.release(st.Name)
	}
	s.WaitGone(set)
}

// A Stack of an element's name that is not the set's is never taken over: the set stalls
// naming it, and the other elements get their Stacks.
func TestReconciler_Reconcile_ForeignStackIsNeverTakenOver(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	foreign := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "envs-dev"}, Spec: pulumiv1.StackSpec{Stack: "mine", ProgramRef: &pulumiv1.ProgramReference{Name: "other"}}}
	s.Create(foreign)
	set := s.listSet("envs", "dev", "qa")
	s.Create(set)
	c := s.stalled(set, v1alpha1.ReasonStackConflict)
	s.g.Expect(c.Message).To(HavePrefix("Stacks envs-dev exist and are not this set's; they are never taken over"))
	s.Eventually(func(g Gomega) { g.Expect(s.live(g, set)).To(HaveKey("qa")) })
	s.g.Expect(s.Get(foreign)).To(Succeed())
	s.g.Expect(foreign.OwnerReferences).To(BeEmpty())
	s.g.Expect(foreign.Spec.Stack).To(Equal("mine"))
}

// A template that does not render for every element stalls the set, and no Stack is
// created: a broken template changes nothing.
func TestReconciler_Reconcile_TemplateThatDoesNotRenderStalls(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	set := s.listSet("envs", "dev", "qa")
	set.Spec.Template.Spec = template(t, map[string]any{"stack": "{{path}}", "programRef": map[string]any{"name": "env"}})
	s.Create(set)
	c := s.stalled(set, pulumiv1.ReasonSpecInvalid)
	s.g.Expect(c.Message).To(ContainSubstring("placeholders the generator does not have: [path]"))
	s.g.Expect(s.stacks(s.g, set)).To(BeEmpty())
}

// A set whose generator yields more elements than the cap stalls naming both counts, and
// creates no Stack: a repository's branches are the tenant's to multiply.
func TestReconciler_Reconcile_TooManyElementsStalls(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	names := make([]string, maxElements+1)
	for i := range names {
		names[i] = fmt.Sprintf("e%d", i)
	}
	set := s.listSet("envs", names...)
	s.Create(set)
	c := s.stalled(set, v1alpha1.ReasonTooManyElements)
	want := fmt.Sprintf("the generator yields %d elements, more than the %d a StackSet may have (the manager's --max-stackset-elements)", maxElements+1, maxElements)
	s.g.Expect(strings.HasPrefix(c.Message, want)).To(BeTrue(), "message %q", c.Message)
	s.g.Expect(s.stacks(s.g, set)).To(BeEmpty())
}
