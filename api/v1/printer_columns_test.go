package v1_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The printer columns are JSONPaths into status that only the API server evaluates: each
// kind is listed here as kubectl lists it (a Table), with a status the controllers write,
// and every column must show the value a person expects.
func TestPrinterColumns_Table_ShowStatusAtAGlance(t *testing.T) {
	ns := env.Namespace(t)
	commit := "0123456789abcdef0123456789abcdef01234567"
	done := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))

	stack := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       pulumiv1.StackSpec{Stack: "org/web/prod", ProgramRef: &pulumiv1.ProgramReference{Name: "web"}},
	}
	mustCreate(t, stack)
	stack.Status = pulumiv1.StackStatus{
		LastUpdate: &pulumiv1.StackUpdateState{
			Name: "web-up-1", Type: "up", State: pulumiv1.UpdateStateSucceeded,
			LastAttemptedCommit: commit, LastSuccessfulCommit: commit, LastResyncTime: &done,
		},
		CurrentUpdate: &pulumiv1.CurrentStackUpdate{Name: "web-up-2"},
		Stackwright: &pulumiv1.StackwrightStatus{ExpiresAt: &metav1.Time{Time: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)},
			Rollout: &pulumiv1.StackRolloutState{Name: "web-fleet", HeldAt: "generation/1"}},
		Conditions: []metav1.Condition{
			{Type: pulumiv1.ConditionReady, Status: metav1.ConditionFalse, Reason: pulumiv1.ReasonNotReadyInProgress, LastTransitionTime: done},
			{Type: pulumiv1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: pulumiv1.ReasonStackProcessing, LastTransitionTime: done},
			{Type: pulumiv1.ConditionDriftDetected, Status: metav1.ConditionFalse, Reason: pulumiv1.ReasonNoDrift, LastTransitionTime: done},
		},
	}
	mustUpdateStatus(t, stack)

	program := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
	mustCreate(t, program)
	program.Status = pulumiv1.ProgramStatus{
		Artifact:   &pulumiv1.ProgramArtifact{Digest: "sha256:ab", Revision: "generation/1"},
		Conditions: []metav1.Condition{{Type: pulumiv1.ConditionReady, Status: metav1.ConditionTrue, Reason: pulumiv1.ReasonArtifactReady, LastTransitionTime: done}},
	}
	mustUpdateStatus(t, program)

	update := &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: "web-up-1", Namespace: ns},
		Spec:       v1alpha1.UpdateSpec{StackName: "web", Type: v1alpha1.UpdateTypeUp, Revision: commit, Attempt: 2},
	}
	mustCreate(t, update)
	update.Status = v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseSucceeded, Result: v1alpha1.UpdateResultSucceeded, Message: "up succeeded: 2 created"}
	mustUpdateStatus(t, update)

	tests := []struct {
		name string
		path string
		want map[string]string
	}{
		{
			name: "stackInProgressWithDeployedRevision",
			path: "/apis/pulumi.com/v1/namespaces/" + ns + "/stacks",
			want: map[string]string{
				"Name": "web", "Stack": "org/web/prod", "Last Update": "succeeded", "Age": "set", "Last Commit": commit,
				"Ready": "False", "Reconciling": pulumiv1.ReasonStackProcessing, "Stalled": "", "Permalink": "",
				"Suspended": "", "Current Update": "web-up-2", "Deployed": commit, "Drift": "False",
				"Expires": "2026-12-01T12:00:00Z",
				"Rollout": "web-fleet", "Held At": "generation/1",
			},
		},
		{
			name: "programReady",
			path: "/apis/pulumi.com/v1/namespaces/" + ns + "/programs",
			want: map[string]string{"Name": "web", "Ready": "True", "Digest": "sha256:ab", "Age": "set"},
		},
		{
			name: "updateSucceeded",
			path: "/apis/stackwright.dev/v1alpha1/namespaces/" + ns + "/updates",
			want: map[string]string{
				"Name": "web-up-1", "Stack": "web", "Type": "up", "Phase": "Succeeded", "Result": "succeeded",
				"Revision": commit, "Attempt": "2", "Message": "up succeeded: 2 created", "Age": "set",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := getTable(t, tt.path)
			if len(table.Rows) != 1 {
				t.Fatalf("table has %d rows, want 1", len(table.Rows))
			}
			got := map[string]string{}
			for i, col := range table.ColumnDefinitions {
				cell := table.Rows[0].Cells[i]
				if cell == nil {
					cell = ""
				}
				got[col.Name] = fmt.Sprint(cell)
				// kubectl prints a date relative to now: only whether one is there matters.
				if col.Type == "date" && got[col.Name] != "" {
					got[col.Name] = "set"
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
		})
	}
}

func mustCreate(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(testContext(t), obj); err != nil {
		t.Fatalf("failed to create %T: %v", obj, err)
	}
}

func mustUpdateStatus(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Status().Update(testContext(t), obj); err != nil {
		t.Fatalf("failed to update status of %T: %v", obj, err)
	}
}

// getTable lists path the way kubectl get does: as a server-side Table.
func getTable(t *testing.T, path string) *metav1.Table {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.GroupVersion = &schema.GroupVersion{}
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		t.Fatalf("failed to create REST client: %v", err)
	}
	body, err := rc.Get().AbsPath(path).Param("includeObject", "None").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(testContext(t))
	if err != nil {
		t.Fatalf("failed to list %s: %v", path, err)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(body, table); err != nil {
		t.Fatalf("failed to decode Table: %v", err)
	}
	return table
}
