package v1alpha1

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

func TestFinished(t *testing.T) {
	for phase, want := range map[UpdatePhase]bool{
		"":                   false,
		UpdatePhasePending:   false,
		UpdatePhaseRunning:   false,
		UpdatePhaseSucceeded: true,
		UpdatePhaseFailed:    true,
	} {
		if got := (&UpdateStatus{Phase: phase}).Finished(); got != want {
			t.Errorf("Finished() for phase %q = %v, want %v", phase, got, want)
		}
	}
}

func TestUpdateDeepCopy(t *testing.T) {
	u := &Update{
		Spec:   UpdateSpec{StackName: "s", Type: UpdateTypeUp, Options: &UpdateOptions{Targets: []string{"urn:a"}}},
		Status: UpdateStatus{Changes: map[string]int64{"create": 1}},
	}
	c := u.DeepCopy()
	if !reflect.DeepEqual(u, c) {
		t.Fatal("DeepCopy differs from original")
	}
	c.Spec.Options.Targets[0] = "urn:b"
	c.Status.Changes["create"] = 2
	if u.Spec.Options.Targets[0] != "urn:a" || u.Status.Changes["create"] != 1 {
		t.Error("DeepCopy shares memory with the original")
	}
}

func TestAddToScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if !s.Recognizes(GroupVersion.WithKind("Update")) || !s.Recognizes(GroupVersion.WithKind("UpdateList")) {
		t.Error("scheme does not know Update/UpdateList")
	}
}
