package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// fileProject is a Pulumi YAML project whose File resource writes <stack>.txt below the
// provider's root.
func fileProject(name, content string) string {
	return fmt.Sprintf("name: %s\nruntime: yaml\nresources:\n  f:\n    type: stackwright-testing:index:File\n    properties:\n      path: ${pulumi.stack}.txt\n      content: %s\n", name, content)
}

// The StackSet controller is registered and works with the real Stack controller: each
// element of a list gets a Stack rendered from the template, which deploys, and the set is
// Ready once they are. The set's behaviour (the git generators, held removals, deletion
// policies, conflicts) is tested in internal/controller/stackset.
func TestManager_StackSet_ListWithTheStackController(t *testing.T) {
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
	spec, err := json.Marshal(map[string]any{
		"stack": "{{name}}-{{values.tier}}", "programRef": map[string]any{"name": "env"}, "resyncFrequencySeconds": 10,
		"envRefs": map[string]any{"STACKWRIGHT_TESTING_ROOT": map[string]any{"type": "Literal", "literal": map[string]any{"value": root}}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	set := &v1alpha1.StackSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "envs"},
		Spec: v1alpha1.StackSetSpec{
			Generator: v1alpha1.StackSetGenerator{List: &v1alpha1.ListGenerator{Elements: []v1alpha1.ListElement{
				{Name: "dev", Values: map[string]string{"tier": "t-dev"}}, {Name: "qa", Values: map[string]string{"tier": "t-qa"}},
			}}},
			Template: v1alpha1.StackSetTemplate{Spec: apiextensionsv1.JSON{Raw: spec}},
		},
	}
	g.Expect(env.Client.Create(ctx, set)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(set), set)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(set.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "set: %v", set.Status.Conditions)
		g.Expect(set.Status.Ready).To(BeEquivalentTo(2))
	}).WithTimeout(4*time.Minute).WithPolling(time.Second).Should(Succeed(), "the set's Stacks deploy")
	g.Expect(filepath.Join(root, "dev-t-dev.txt")).To(BeAnExistingFile())
	g.Expect(filepath.Join(root, "qa-t-qa.txt")).To(BeAnExistingFile())
}
