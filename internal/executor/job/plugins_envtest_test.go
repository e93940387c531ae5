package job_test

import (
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// A program that names a provider the runner has nowhere (no bundle, not on its PATH)
// fails once, through a real runner and the manager's record of its report, and its Stack
// stalls at once naming the plugin: retrying could only fail the same way.
func TestExecutor_MissingProvider_StallsAtOnceNamingIt(t *testing.T) {
	s := newScenario(t)
	s.filesStackWith("needs-random", nil, func(st *pulumiv1.Stack) {
		p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "needs-random-program"}}
		p.Program.Resources = map[string]pulumiv1.Resource{"pet": {
			Type:       "random:index:RandomPet",
			Properties: map[string]apiextensionsv1.JSON{"length": {Raw: []byte(`2`)}},
		}}
		s.Create(p)
		st.Spec.ProgramRef.Name = p.Name
	})
	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "needs-random"}}
	s.WaitCondition(st, pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonMissingPlugin)
	msg := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled).Message
	for _, want := range []string{"needs a plugin the runner does not have", "the engine has no plugin pulumi-resource-random", "spec.stackwright.plugins"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Stalled message = %q; want it to contain %q", msg, want)
		}
	}
	// The suite retries a failure after a second: a stall that did not hold would show
	// a second Update by now.
	time.Sleep(5 * time.Second)
	updates := s.updates()
	if len(updates) != 1 {
		t.Fatalf("%d Updates; want the one that found the plugin missing", len(updates))
	}
	if c := apimeta.FindStatusCondition(updates[0].Status.Conditions, v1alpha1.ConditionComplete); c == nil || c.Reason != v1alpha1.ReasonMissingPlugin {
		t.Errorf("Update's Complete condition = %+v; want reason MissingPlugin", c)
	}
}
