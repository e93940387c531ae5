package program_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/controller/program"
)

// announced collects what every manager of the package's tests announced and whether the
// status it announced was written by then.
var announced struct {
	sync.Mutex
	seen       map[string]int
	violations []string
}

// announcingRecorder reads each Program from the API server (not the cache) as its event
// comes, and records a violation when its Ready condition does not yet say what the event
// does.
type announcingRecorder struct {
	events.EventRecorder
	reader client.Reader
}

func (r *announcingRecorder) Eventf(regarding, related runtime.Object, typ, reason, action, note string, args ...any) {
	if p, ok := regarding.(*pulumiv1.Program); ok {
		written := &pulumiv1.Program{}
		err := r.reader.Get(context.Background(), client.ObjectKeyFromObject(p), written)
		msg := fmt.Sprintf(note, args...)
		ready := conditions.Get(written, pulumiv1.ConditionReady)
		announced.Lock()
		if announced.seen == nil {
			announced.seen = map[string]int{}
		}
		announced.seen[reason]++
		if err == nil && (ready == nil || ready.Message != msg) {
			announced.violations = append(announced.violations, fmt.Sprintf("%s about Program %s/%s before its status said %q", reason, p.Namespace, p.Name, msg))
		}
		announced.Unlock()
	}
	r.EventRecorder.Eventf(regarding, related, typ, reason, action, note, args...)
}

// Every event of the Program controller follows the status it announces: the recorder finds
// the Ready condition saying it when the event comes (for every test of the package; this
// one makes sure the reason was seen).
func TestReconciler_Events_FollowTheStatusTheyAnnounce(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	p := newProgram("announced", filesSpec(`"${message}"`))
	s.Create(p)
	s.WaitCondition(p, pulumiv1.ConditionReady, metav1.ConditionTrue, "")
	NewWithT(t).Eventually(func(g Gomega) {
		announced.Lock()
		defer announced.Unlock()
		g.Expect(announced.seen[program.EventReasonArtifactReady]).To(BeNumerically(">", 0))
	}).Should(Succeed())
	announced.Lock()
	defer announced.Unlock()
	NewWithT(t).Expect(announced.violations).To(BeEmpty())
}
