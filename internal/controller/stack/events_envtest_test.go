package stack_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/stack"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// announced is the suite's recorder: as each event about a Stack arrives, it reads the
// Stack from the API server (not the cache) and checks that the status the event
// announces is already written (announcesUpdate). Every test of the package runs under it.
var announced *kubetest.Recorder[*pulumiv1.Stack]

// announcesUpdate says what an event about an Update of the Stack announces that the
// stored Stack does not show: a finished Update as the last update, a started one as the
// update in flight. Other events are not checked here.
func announcesUpdate(e kubetest.Event, _, stored *pulumiv1.Stack) error {
	u, ok := e.Related.(*v1alpha1.Update)
	if !ok {
		return nil
	}
	var shows bool
	switch st := stored.Status; e.Reason {
	case stack.EventUpdateSucceeded, stack.EventUpdateFailed:
		shows = st.LastUpdate != nil && st.LastUpdate.Name == u.Name
	case stack.EventUpdateStarted:
		shows = st.CurrentUpdate != nil && st.CurrentUpdate.Name == u.Name
	default:
		return nil
	}
	if !shows {
		return fmt.Errorf("emitted before its status showed Update %s", u.Name)
	}
	return nil
}

// Every UpdateStarted, UpdateSucceeded and UpdateFailed event follows the status it
// announces: the recorder finds it written when the event comes (for every test of the
// package; this one makes sure each reason was seen).
func TestStackReconciler_Events_FollowTheStatusTheyAnnounce(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("fine", map[string]pulumiv1.Resource{"f": fileResource("fine.txt", "fine")}, nil))
	s.create(s.stack("fine", "fine"))
	s.create(s.program("broken", map[string]pulumiv1.Resource{"f": flakyResource(100, 0)}, nil))
	s.create(s.stack("broken", "broken"))
	s.waitReady("fine")
	s.eventually(func(g Gomega) {
		for _, reason := range []string{stack.EventUpdateStarted, stack.EventUpdateSucceeded, stack.EventUpdateFailed} {
			g.Expect(announced.Count("", "", reason)).To(BeNumerically(">", 0), "no %s event seen", reason)
		}
	})
	s.g.Expect(announced.Unwritten("")).To(BeEmpty())
}
