package stack_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/controller/stack"
)

// A deleted Stack whose published outputs another Stack reads is held, naming its reader,
// and destroyed only once the reader is gone: deleted together, they come down in reverse
// order of their wiring, and the reader's destroy still finds its inputs.
func TestStackReconciler_Delete_HeldWhileItsOutputsAreRead(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("base", map[string]pulumiv1.Resource{"f": fileResource("base.txt", "base")}, map[string]string{"digest": "${f.sha256}"}))
	base := s.stack("base", "base")
	base.Spec.Stackwright = &pulumiv1.StackwrightSpec{Outputs: &pulumiv1.OutputsExport{ConfigMapName: "base-outputs"}}
	s.create(base)
	prog := s.program("app", map[string]pulumiv1.Resource{"copy": fileResource("app.txt", "${digest}")}, nil)
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"digest": {Type: pulumiv1.ConfigType("String")}}
	s.create(prog)
	app := s.stack("app", "app")
	app.Spec.Prerequisites = []pulumiv1.PrerequisiteRef{{Name: "base"}}
	app.Spec.ConfigRef = map[string]pulumiv1.ConfigMapRef{"digest": {Name: "base-outputs", Key: "digest"}}
	s.create(app)
	base = s.waitReady("base")
	s.waitReady("app")

	s.g.Expect(env.Client.Delete(s.ctx(), base)).To(Succeed())
	held := s.waitCondition("base", pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonInUse)
	s.g.Expect(held.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("Stack(s) app read the outputs it publishes (ConfigMap base-outputs)"))))
	s.kube.WaitEvent(held, corev1.EventTypeNormal, stack.EventInUse)
	s.g.Consistently(func() (string, error) { return s.readFile("base.txt") }).WithTimeout(2*time.Second).WithPolling(200*time.Millisecond).Should(Equal("base"), "the base was destroyed while read")

	app = s.get(s.g, "app")
	s.g.Expect(env.Client.Delete(s.ctx(), app)).To(Succeed())
	s.waitGone(app)
	s.requireDestroyed("app.txt")
	s.waitGone(base)
	s.requireDestroyed("base.txt")
}
