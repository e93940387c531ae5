package kit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

func TestRun_Phases_StopAtTheFirstThatEndsOrFails(t *testing.T) {
	boom := errors.New("boom")
	step := func(name string, proceed bool, err error) Phase[*[]string] {
		return func(_ context.Context, s *[]string) (bool, error) {
			*s = append(*s, name)
			return proceed, err
		}
	}
	tests := []struct {
		name    string
		phases  []Phase[*[]string]
		want    []string
		wantErr error
	}{
		{name: "AllProceed", phases: []Phase[*[]string]{step("a", true, nil), step("b", true, nil)}, want: []string{"a", "b"}},
		{name: "OneEnds", phases: []Phase[*[]string]{step("a", false, nil), step("b", true, nil)}, want: []string{"a"}},
		{name: "OneFails", phases: []Phase[*[]string]{step("a", true, boom), step("b", true, nil)}, want: []string{"a"}, wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran []string
			if err := Run(context.Background(), &ran, tt.phases...); !errors.Is(err, tt.wantErr) {
				t.Errorf("Run() = %v; want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, ran); diff != "" {
				t.Errorf("phases run (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequeue_After_EarliestPositiveWins(t *testing.T) {
	var q Requeue
	for _, d := range []time.Duration{0, time.Minute, -time.Second, 10 * time.Second, time.Hour} {
		q.After(d)
	}
	if got := q.Result().RequeueAfter; got != 10*time.Second {
		t.Errorf("RequeueAfter = %v; want 10s", got)
	}
}

// recorder is an events.EventRecorder that keeps what it is given.
type recorder struct{ got []string }

func (r *recorder) Eventf(_ runtime.Object, _ runtime.Object, typ, reason, action, note string, args ...any) {
	r.got = append(r.got, fmt.Sprintf("%s %s %s: %s", typ, reason, action, fmt.Sprintf(note, args...)))
}

var _ events.EventRecorder = (*recorder)(nil)

func TestEvents_Flush_OnlyAfterTheStatusWasWritten(t *testing.T) {
	obj := &corev1.ConfigMap{}
	tests := []struct {
		name      string
		statusErr error
		want      []string
	}{
		{name: "StatusWritten", want: []string{"Normal Started Reconcile: wave 1", "Warning Halted Reconcile: gate failed"}},
		{name: "StatusWriteFailed", statusErr: errors.New("conflict")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			e := NewEvents(rec, "Reconcile")
			e.Add(obj, corev1.EventTypeNormal, "Started", "wave %d", 1)
			e.Add(obj, corev1.EventTypeWarning, "Halted", "gate failed")
			if len(rec.got) != 0 {
				t.Fatalf("events emitted before Flush: %v", rec.got)
			}
			e.Flush(tt.statusErr)
			if diff := cmp.Diff(tt.want, rec.got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			e.Flush(nil)
			if diff := cmp.Diff(tt.want, rec.got); diff != "" {
				t.Errorf("a second Flush emitted again (-want +got):\n%s", diff)
			}
		})
	}
}
