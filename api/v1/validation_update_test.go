package v1_test

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

func TestUpdate_Create_RejectsInvalid(t *testing.T) {
	cases := []invalidCase{
		{
			name: "badType",
			body: `
spec:
  stackName: files
  type: apply`,
			want: `spec.type: Unsupported value: "apply"`,
		},
		{
			name: "missingType",
			body: `
spec:
  stackName: files`,
			want: "spec.type: Required value",
		},
		{
			name: "missingStackName",
			body: `
spec:
  type: up`,
			want: "spec.stackName: Required value",
		},
		{
			name: "zeroAttempt",
			body: `
spec:
  stackName: files
  type: up
  attempt: 0`,
			want: "spec.attempt: Invalid value: 0",
		},
	}
	runInvalid(t, "stackwright.dev/v1alpha1", "Update", cases)
}

// An Update's spec cannot change once created (a retry is a new Update), while its
// metadata and status can.
func TestUpdate_Update_RejectsSpecMutation(t *testing.T) {
	ctx := testContext(t)
	ns := env.Namespace(t)
	u := &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: "files-up-1", Namespace: ns},
		Spec: v1alpha1.UpdateSpec{
			StackName: "files",
			Type:      v1alpha1.UpdateTypeUp,
			Revision:  "abc123",
			Attempt:   1,
			Options:   &v1alpha1.UpdateOptions{Refresh: true},
		},
	}
	if err := env.Client.Create(ctx, u); err != nil {
		t.Fatalf("failed to create Update: %v", err)
	}

	mutations := []struct {
		name   string
		mutate func(*v1alpha1.UpdateSpec)
	}{
		{"type", func(s *v1alpha1.UpdateSpec) { s.Type = v1alpha1.UpdateTypeDestroy }},
		{"revision", func(s *v1alpha1.UpdateSpec) { s.Revision = "def456" }},
		{"attempt", func(s *v1alpha1.UpdateSpec) { s.Attempt = 2 }},
		{"options", func(s *v1alpha1.UpdateSpec) { s.Options.Targets = []string{"urn:pulumi:dev::p::t::n"} }},
		{"optionsRemoved", func(s *v1alpha1.UpdateSpec) { s.Options = nil }},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			changed := u.DeepCopy()
			m.mutate(&changed.Spec)
			err := env.Client.Update(ctx, changed)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("changing spec.%s returned %v; want Invalid", m.name, err)
			}
			if want := "spec: Invalid value: spec is immutable; create a new Update instead"; !strings.Contains(err.Error(), want) {
				t.Errorf("changing spec.%s returned %q; want it to contain %q", m.name, err, want)
			}
		})
	}

	labelled := u.DeepCopy()
	labelled.Labels = map[string]string{v1alpha1.StackLabel: "files"}
	if err := env.Client.Update(ctx, labelled); err != nil {
		t.Errorf("changing only the labels returned %v; want success", err)
	}
	labelled.Status = v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseRunning, Runner: "local/test/1"}
	if err := env.Client.Status().Update(ctx, labelled); err != nil {
		t.Errorf("updating the status returned %v; want success", err)
	}
}
