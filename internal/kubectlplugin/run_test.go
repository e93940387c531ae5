package kubectlplugin_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/autoupdate"
)

// requests lists the fixture's auto.pulumi.com Updates.
func (f *fixture) requests(t *testing.T) []autov1alpha1.Update {
	t.Helper()
	var list autov1alpha1.UpdateList
	if err := env.Client.List(t.Context(), &list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// `run` without waiting creates the request with the flags as PKO's options.
func TestCommand_Run_CreatesTheRequest(t *testing.T) {
	f := newFixture(t)
	out, err := f.run(t, "run", "refresh", "web", "--wait=false", "--target", "urn:a", "--target", "urn:b",
		"--preview-only", "--parallel", "2", "--message", "look only", "--ttl", "0")
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.requests(t)
	if len(reqs) != 1 {
		t.Fatalf("requests = %d; want 1", len(reqs))
	}
	want := autov1alpha1.UpdateSpec{
		WorkspaceName: "web", Type: autov1alpha1.RefreshType, Target: []string{"urn:a", "urn:b"},
		PreviewOnly: ptr.To(true), Parallel: ptr.To[int32](2), Message: ptr.To("look only"),
	}
	if diff := cmp.Diff(want, reqs[0].Spec); diff != "" {
		t.Errorf("request spec (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(reqs[0].Name, "web-refresh-") || !strings.Contains(out, "update.auto.pulumi.com/"+reqs[0].Name) {
		t.Errorf("request %s; printed %q", reqs[0].Name, out)
	}
}

// `run` waits for the result the Stack records in the request: it prints the Update that
// runs it and the summary, and fails when the operation failed.
func TestCommand_Run_WaitsForTheResult(t *testing.T) {
	for _, tc := range []struct {
		name    string
		phase   v1alpha1.UpdatePhase
		result  v1alpha1.UpdateResult
		message string
		wantErr string
	}{
		{"succeeded", v1alpha1.UpdatePhaseSucceeded, v1alpha1.UpdateResultSucceeded, "up succeeded: 1 updated", ""},
		{"failed", v1alpha1.UpdatePhaseFailed, v1alpha1.UpdateResultFailed, "boom", "up of Stack %s/web failed (failed): boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			done := make(chan struct{})
			go func() {
				defer close(done)
				// Plays the Stack controller's part: mark the request running, then finished.
				for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
					reqs := f.requests(t)
					if len(reqs) == 0 {
						continue
					}
					req := &reqs[0]
					u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: "web-up-0123456789"}}
					autoupdate.MarkRunning(req, u)
					if err := env.Client.Status().Update(t.Context(), req); err != nil {
						t.Errorf("failed to mark the request running: %v", err)
						return
					}
					time.Sleep(1500 * time.Millisecond)
					u.Status = v1alpha1.UpdateStatus{Phase: tc.phase, Result: tc.result, Message: tc.message}
					autoupdate.MarkFinished(req, u, time.Now())
					if err := env.Client.Status().Update(t.Context(), req); err != nil {
						t.Errorf("failed to mark the request finished: %v", err)
					}
					return
				}
				t.Error("no request was created")
			}()
			out, err := f.run(t, "run", "up", "web", "--yes")
			<-done
			if tc.wantErr != "" {
				if want := strings.Replace(tc.wantErr, "%s", f.ns, 1); err == nil || err.Error() != want {
					t.Errorf("run: error %v; want %q", err, want)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"Running as Update web-up-0123456789", tc.message} {
				if tc.wantErr == "" && !strings.Contains(out, want) {
					t.Errorf("printed %q; want it to contain %q", out, want)
				}
			}
		})
	}
}

func TestCommand_Run_RefusesWhatCannotRun(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "destroy", "web"}, "destroy changes the resources of Stack " + f.ns + "/web: confirm with --yes"},
		{[]string{"run", "up", "web"}, "up changes the resources of Stack " + f.ns + "/web: confirm with --yes"},
		{[]string{"run", "rollback", "web"}, `unknown operation "rollback": use one of preview, up, refresh, destroy`},
		{[]string{"run", "refresh", "nope"}, "failed to get Stack " + f.ns + "/nope"},
	} {
		if _, err := f.run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v; want one containing %q", tc.args, err, tc.want)
		}
	}
	if n := len(f.requests(t)); n != 0 {
		t.Errorf("%d requests were created; want none", n)
	}
}
