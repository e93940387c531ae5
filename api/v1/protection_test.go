package v1_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// A Stack annotated stackwright.dev/protected=true cannot be deleted until the annotation
// is removed; the refusal names the Stack and the annotation. Other values protect nothing.
func TestProtection_Delete_RefusedWhileAnnotated(t *testing.T) {
	ns := env.Namespace(t)
	kubetest.InstallProtection(testContext(t), t, env.Client, ns)
	ctx := testContext(t)
	g := NewWithT(t)
	newStack := func(name, protected string) *pulumiv1.Stack {
		st := &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{pulumiv1.ProtectedAnnotation: protected}},
			Spec:       pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "p"}},
		}
		g.Expect(env.Client.Create(ctx, st)).To(Succeed())
		return st
	}
	kept := newStack("kept", "true")
	err := env.Client.Delete(ctx, kept)
	want := fmt.Sprintf("Stack %s/kept is protected from deletion (annotation stackwright.dev/protected=true): remove the annotation first", ns)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(want))

	off := newStack("off", "false")
	g.Expect(env.Client.Delete(ctx, off)).To(Succeed(), "only \"true\" protects")

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kept), kept)).To(Succeed())
	delete(kept.Annotations, pulumiv1.ProtectedAnnotation)
	g.Expect(env.Client.Update(ctx, kept)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, kept)).To(Succeed())
}
