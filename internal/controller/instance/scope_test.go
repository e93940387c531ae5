package instance

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/stackwright/stackwright/internal/controller/kit"
)

// recorder is an events.EventRecorder that keeps what it is given.
type recorder struct{ got []string }

func (r *recorder) Eventf(_ runtime.Object, _ runtime.Object, typ, reason, action, note string, args ...any) {
	r.got = append(r.got, fmt.Sprintf("%s %s %s: %s", typ, reason, action, fmt.Sprintf(note, args...)))
}

var _ events.EventRecorder = (*recorder)(nil)

// A warning that no status records is announced when its state is new, and only once the
// instance's status was written: a failed write announces nothing and remembers nothing,
// a state seen again is not announced again, and one that cleared is new when it returns.
func TestScope_Warn_OnlyNewStatesAfterTheStatusWasWritten(t *testing.T) {
	const approval = "Warning ApprovalIgnored Render: The approve and reject annotations are ignored: no approvers"
	type step struct {
		state     string
		statusErr error
		want      []string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "Once", steps: []step{{state: "no approvers/p1", want: []string{approval}}, {state: "no approvers/p1"}}},
		{name: "AnotherState", steps: []step{{state: "no approvers/p1", want: []string{approval}}, {state: "no approvers/p2", want: []string{approval}}}},
		{name: "ClearedThenBack", steps: []step{{state: "no approvers/p1", want: []string{approval}}, {}, {state: "no approvers/p1", want: []string{approval}}}},
		{name: "StatusWriteFailed", steps: []step{{state: "no approvers/p1", statusErr: errors.New("conflict")}, {state: "no approvers/p1", want: []string{approval}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var memory notices
			req := Request{Template: "db", NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "orders"}}
			for i, st := range tt.steps {
				rec := &recorder{}
				s := &scope{req: req, render: kit.NewEvents(rec, eventActionRender), observe: kit.NewEvents(rec, eventActionObserve), notices: &memory}
				s.warn(&unstructured.Unstructured{}, EventApprovalIgnored, st.state, "The approve and reject annotations are ignored: %s", "no approvers")
				s.flush(st.statusErr)
				if diff := cmp.Diff(st.want, rec.got); diff != "" {
					t.Errorf("step %d: events (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestNotices_Forget_OnlyTheGoneInstance(t *testing.T) {
	var n notices
	gone := Request{Template: "db", NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "orders"}}
	kept := Request{Template: "db", NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "users"}}
	n.record(noted{key: noticeKey{instance: gone, reason: EventApprovalIgnored}, state: "x"},
		noted{key: noticeKey{instance: gone, reason: EventRevisionNotOpened}, state: "y"},
		noted{key: noticeKey{instance: kept, reason: EventApprovalIgnored}, state: "x"})
	n.forget(gone)
	if diff := cmp.Diff(map[noticeKey]string{{instance: kept, reason: EventApprovalIgnored}: "x"}, n.last, cmp.AllowUnexported(noticeKey{}, Request{})); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
}
