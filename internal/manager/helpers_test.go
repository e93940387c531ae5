package manager_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/manager"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// testOptions are the options of a manager a test starts: the repository's pulumi and YAML
// host, a data directory of its own, no metrics or probe listener, and leave for the
// package's other tests to run managers in the same process.
func testOptions(t *testing.T) *manager.Options {
	t.Helper()
	bin, err := repo.Bin()
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.RequireBinaries(bin, "pulumi", "pulumi-language-yaml"); err != nil {
		t.Fatal(err)
	}
	opts := manager.DefaultOptions()
	opts.DataDir, opts.PulumiBin = t.TempDir(), bin
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	opts.SeveralPerProcess = true
	// Tests of one process trust each other's Stacks; TestOptions_CheckTenancy covers the
	// refusal.
	opts.NoTenantIsolation = true
	return opts
}

// createHello creates a Program with one output and a Stack of it, both named name.
func createHello(t *testing.T, ns, name string, labels map[string]string) *pulumiv1.Stack {
	t.Helper()
	g := NewWithT(t)
	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"greeting": {Raw: []byte(`"hello"`)}}
	stack := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: name}},
	}
	g.Expect(env.Client.Create(t.Context(), prog)).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), stack)).To(Succeed())
	return stack
}

// waitReady waits until the Stack is Ready.
func waitReady(t *testing.T, stack *pulumiv1.Stack, why string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		st := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(stack), st)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "conditions: %v", st.Status.Conditions)
	}).WithTimeout(3*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), why)
}
