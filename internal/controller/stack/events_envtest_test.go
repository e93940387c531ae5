package stack_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/stack"
)

// announced is the suite's recorder: as each event about an Update of a Stack arrives, it
// reads the Stack from the API server (not the cache) and checks that the status the
// event announces is already written. Every test of the package runs under it.
var announced = &announcingRecorder{seen: map[string]int{}}

type announcingRecorder struct {
	events.EventRecorder
	reader client.Reader

	mu         sync.Mutex
	seen       map[string]int
	violations []string
}

func (r *announcingRecorder) Eventf(regarding, related runtime.Object, typ, reason, action, note string, args ...any) {
	st, isStack := regarding.(*pulumiv1.Stack)
	u, isUpdate := related.(*v1alpha1.Update)
	if isStack && isUpdate {
		r.check(st, u, reason)
	}
	r.EventRecorder.Eventf(regarding, related, typ, reason, action, note, args...)
}

// check records a violation when the Stack's written status does not yet show what an
// event of reason about Update u says: a finished Update as the last update, a started one
// as the update in flight.
func (r *announcingRecorder) check(st *pulumiv1.Stack, u *v1alpha1.Update, reason string) {
	var shows func(*pulumiv1.Stack) bool
	switch reason {
	case stack.EventUpdateSucceeded, stack.EventUpdateFailed:
		shows = func(s *pulumiv1.Stack) bool { return s.Status.LastUpdate != nil && s.Status.LastUpdate.Name == u.Name }
	case stack.EventUpdateStarted:
		shows = func(s *pulumiv1.Stack) bool {
			return s.Status.CurrentUpdate != nil && s.Status.CurrentUpdate.Name == u.Name
		}
	default:
		return
	}
	written := &pulumiv1.Stack{}
	err := r.reader.Get(context.Background(), client.ObjectKeyFromObject(st), written)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[reason]++
	if err == nil && !shows(written) {
		r.violations = append(r.violations, fmt.Sprintf("%s about Update %s of Stack %s/%s before its status says so", reason, u.Name, st.Namespace, st.Name))
	}
}

func (r *announcingRecorder) report() (seen map[string]int, violations []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen = map[string]int{}
	for k, v := range r.seen {
		seen[k] = v
	}
	return seen, append([]string(nil), r.violations...)
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
		seen, _ := announced.report()
		for _, reason := range []string{stack.EventUpdateStarted, stack.EventUpdateSucceeded, stack.EventUpdateFailed} {
			g.Expect(seen[reason]).To(BeNumerically(">", 0), "no %s event seen", reason)
		}
	})
	_, violations := announced.report()
	s.g.Expect(violations).To(BeEmpty())
}
